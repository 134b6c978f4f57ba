"""A JSON agent log (ATIF, Gemini CLI's session, OpenHands' events, SkillsBench's episode list) read
one element at a time, in bounded memory.

These logs are one JSON document whose bulk is a single array (`steps`, `messages`, the events),
often pretty-printed into millions of short lines. Parsed whole, a 126 MB ATIF of 8 million lines
took 14 s and 1 GB; here the top level is walked by hand and each element of a top-level array
(or each top-level value) is decoded alone with the standard library's C decoder
(`json.JSONDecoder.raw_decode`), from a buffer refilled in 4 MiB chunks: memory is the chunk plus
the largest element.

`json_items(path)` yields `(key, value)`: for a top-level array each element with key None; for
a top-level object each key's value, an array value element by element (first `(key, ARRAY)`,
then `(key, element)` for each). A document that is not valid JSON raises InputError naming the
file and the character offset.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import IO, Any

from skillaudit.errors import InputError

CHUNK = 1 << 22
#: the value yielded as `(key, ARRAY)` when a top-level key's array starts
ARRAY = object()
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL = re.compile(r"[0-9eE.+-]*")
_DECODER = json.JSONDecoder()
_NEAR_END = 16  # a decode error this close to the buffer's end may be a value cut by the chunk


class _Reader:
    def __init__(self, fh: IO[bytes], path: str) -> None:
        self.fh, self.path = fh, path
        self.dec = codecs.getincrementaldecoder("utf-8")("replace")
        self.buf, self.pos, self.eof, self.offset = "", 0, False, 0  # offset: characters dropped so far

    def more(self) -> bool:
        """Append the next chunk to what is left of the buffer; False at the end of the file."""
        if self.eof:
            return False
        data = self.fh.read(CHUNK)
        text = self.dec.decode(data, final=not data)
        if not data:
            self.eof = True
        self.offset += self.pos
        self.buf, self.pos = self.buf[self.pos:] + text, 0
        return bool(data or text)

    def peek(self) -> str:
        """The next character that is not whitespace ('' at the end of the file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def fail(self, what: str) -> InputError:
        return InputError(f"{self.path}: not valid JSON ({what}) at character {self.offset + self.pos:,}")

    def take(self, ch: str) -> None:
        if self.peek() != ch:
            raise self.fail(f"expected {ch!r}")
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value, decoded alone (more of the file read while it is cut by the chunk)."""
        if self.peek() == "":
            raise self.fail("the document ends early")
        while True:
            try:
                v, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buf) - _NEAR_END or exc.msg.startswith("Unterminated string")
                if cut and self.more():
                    continue
                self.pos = exc.pos
                raise self.fail(exc.msg) from None
            except RecursionError:
                raise self.fail("nested too deeply") from None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and _NUMBER_TAIL.fullmatch(self.buf, end) \
                    and self.more():
                continue  # a number the chunk may have cut ("-1.5e" of "-1.5e-07"): read on, decode again
            self.pos = end
            return v

    def elements(self) -> Iterator[Any]:
        """The elements of the array whose '[' was just taken, then its ']'."""
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            c = self.peek()
            self.pos += 1
            if c == "]":
                return
            if c != ",":
                self.pos -= 1
                raise self.fail("expected ',' or ']' between array elements")


def json_items(path: str) -> Iterator[tuple[str | None, Any]]:
    """The top level of a JSON document, streamed (module docstring); InputError (one line) when the
    file cannot be read, is over the document cap (SKILLAUDIT_MAX_DOCUMENT_MB) or is not JSON."""
    from skillaudit.importers.trajectories.base import open_log

    with open_log(path) as fh:
        r = _Reader(fh, path)
        first = r.peek()
        if first == "":
            raise InputError(f"{path}: empty; expected a JSON document")
        if first == "[":
            r.pos += 1
            for v in r.elements():
                yield None, v
        elif first == "{":
            r.pos += 1
            if r.peek() == "}":
                r.pos += 1
            else:
                while True:
                    key = r.value()
                    if not isinstance(key, str):
                        raise r.fail("an object key must be a string")
                    r.take(":")
                    if r.peek() == "[":
                        r.pos += 1
                        yield key, ARRAY
                        for v in r.elements():
                            yield key, v
                    else:
                        yield key, r.value()
                    c = r.peek()
                    r.pos += 1
                    if c == "}":
                        break
                    if c != ",":
                        r.pos -= 1
                        raise r.fail("expected ',' or '}' between members")
        else:
            raise InputError(f"{path}: expected a JSON object or array at the top level")
        if r.peek() != "":
            raise r.fail("extra data after the document")


def walk(value: Any) -> Iterator[dict[str, Any]]:
    """Every dict inside `value` (itself included), in document order, iteratively."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(reversed([v for v in node.values() if isinstance(v, (dict, list))]))
        elif isinstance(node, list):
            stack.extend(reversed([v for v in node if isinstance(v, (dict, list))]))
