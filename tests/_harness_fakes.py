"""Test doubles for the harness: a scripted OpenAI-compatible server and tiny benchmark files."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Reply = tuple[int, dict[str, Any]]


def chat_reply(content: str | None = None, tool_calls: list[dict] | None = None,
               finish: str = "stop") -> Reply:
    """A /chat/completions body with one choice."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return 200, {"id": "x", "object": "chat.completion", "model": "fake",
                 "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def text_reply(text: str, finish: str = "stop") -> Reply:
    """A /completions body with one choice."""
    return 200, {"id": "x", "object": "text_completion", "model": "fake",
                 "choices": [{"index": 0, "text": text, "finish_reason": finish}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def native_call(query: Any, call_id: str = "call_1") -> dict:
    args = json.dumps({"query": query}) if not isinstance(query, dict) else json.dumps(query)
    return {"id": call_id, "type": "function", "function": {"name": "search_skills", "arguments": args}}


class ScriptedServer:
    """An OpenAI-compatible server on 127.0.0.1 (port 0) that answers with `responder(path, body)`
    or, when given a list, with the next scripted reply; every request is kept in `requests`."""

    def __init__(self, responder: Callable[[str, dict], Reply] | list[Reply]) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._script = list(responder) if isinstance(responder, list) else None
        self._responder = responder if callable(responder) else None
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # /v1/models
                self._send(200, {"object": "list", "data": [{"id": "fake"}]})

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                with outer._lock:
                    outer.requests.append({"path": self.path, **body})
                    outer.headers.append(dict(self.headers))
                    if outer._script is not None:
                        status, payload = outer._script.pop(0) if outer._script else (500, {"error": "script exhausted"})
                    else:
                        status, payload = outer._responder(self.path, body)
                self._send(status, payload)

            def _send(self, status: int, payload: Any) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- tiny benchmark files ------------------------------------------------------------------------
MBPP_ROWS = [
    {"task_id": "Mbpp/2", "prompt": "'''\nWrite a function to find the shared elements from the given two lists.\n'''",
     "entry_point": "similar_elements",
     "canonical_solution": "\ndef similar_elements(test_tup1, test_tup2):\n  return tuple(set(test_tup1) & set(test_tup2))\n",
     "base_input": [[[3, 4, 5, 6], [5, 7, 4, 10]], [[1, 2, 3, 4], [5, 4, 3, 7]]],
     "plus_input": [[[], []], [[1, 2, 3], [3]]], "atol": 0, "contract": "",
     "assertion": "\nassert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))\n"},
    {"task_id": "Mbpp/3", "prompt": "'''\nWrite a python function to identify non-prime numbers.\n'''",
     "entry_point": "is_not_prime",
     "canonical_solution": "\nimport math\ndef is_not_prime(n):\n    if n == 1:\n        return True\n    for i in range(2, int(math.sqrt(n))+1):\n        if n % i == 0:\n            return True\n    return False\n",
     "base_input": [[2], [10], [35]], "plus_input": [[1], [7], [49]], "atol": 0, "contract": "",
     "assertion": "\nassert is_not_prime(2) == False\n"},
    {"task_id": "Mbpp/4", "prompt": "'''\nWrite a function to compute the area of a circle with radius r.\n'''",
     "entry_point": "circle_area",
     "canonical_solution": "\nimport math\ndef circle_area(r):\n    return math.pi * r * r\n",
     "base_input": [[1], [2.5]], "plus_input": [[0.1], [10]], "atol": 1e-6, "contract": "",
     "assertion": "\nassert abs(circle_area(1) - 3.14159) < 1e-4\n"},
]
GSM8K_ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?",
     "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
    {"question": "A book costs $12 and is 25% off. What is the price?",
     "answer": "12 * 0.75 = 9\n#### 9"},
    {"question": "Sara reads 1,200 pages in 4 days. Pages per day?",
     "answer": "#### 300"},
]

CORRECT_CODE = {
    "Mbpp/2": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
    "Mbpp/3": "def is_not_prime(n):\n    return n == 1 or any(n % i == 0 for i in range(2, int(n ** 0.5) + 1))\n",
    "Mbpp/4": "import math\n\ndef circle_area(r):\n    return math.pi * r ** 2\n",
}


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_library(folder: Path) -> Path:
    """A four-skill library in Agent Skills format."""
    skills = {
        "set-intersection": ("coding", "Shared elements of two lists with set intersection.",
                             "## When to apply\nCommon, shared or overlapping elements of two lists.\n"
                             "```python\ndef shared(a, b):\n    return tuple(set(a) & set(b))\n```"),
        "prime-test": ("coding", "Test whether a number is prime or not prime with trial division.",
                       "## When to apply\nPrime, non-prime, divisor questions.\n"),
        "percent-off": ("math", "Percent discounts: price after p% off is price * (1 - p/100).",
                        "## When to apply\nSales, discounts, percent off.\n"),
        "unit-rate": ("math", "Rates per day, per item: divide the total by the count.",
                      "## When to apply\nPages per day, cost per item.\n"),
    }
    for name, (domain, desc, body) in skills.items():
        d = folder / name
        d.mkdir(parents=True)
        (d / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {json.dumps(desc)}\nmetadata:\n  domain: {domain}\n---\n{body}\n",
            encoding="utf-8")
    return folder
