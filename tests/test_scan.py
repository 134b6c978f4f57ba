"""The C column scanner (skillaudit/runs/_scan.c): what it accepts it reads exactly as msgspec does."""

from __future__ import annotations

import gzip
import io
import json
import random

import numpy as np
import pytest
from test_runs import _messy_records, _reference, assert_matches_reference

from skillaudit.errors import RunLogError
from skillaudit.library import Library, Skill
from skillaudit.runs import load_runs, pairing, reader, records


def test_the_scanner_is_built():
    """`make install` compiles the scanner (setup.py marks it optional only for machines without a compiler)."""
    from skillaudit.runs import _scan

    assert reader._scan is _scan
    assert reader._State(records._CodeLines(None), adherence=False).tables is not None


_CODE = "return sorted(set(values))"
_LIB = Library(skills=(Skill(id="s3", name="s3", description="d", body=f"```python\n{_CODE}\n```"),))


def _read(blob: bytes, scanner: bool, adherence: bool = False) -> tuple[int | None, dict]:
    st = reader._State(records._CodeLines(_LIB), adherence=adherence)
    if not scanner:
        st.tables = None
    st.names[0] = "f.jsonl"
    try:
        n, err = reader._feed_blob(st, blob, 1, 0), None
    except RunLogError as exc:
        n, err = None, str(exc)
    return n, pairing._concat([reader._part(st, err)])


def _assert_same_part(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k, x in a.items():
        y = b[k]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), k
        else:
            assert x == y, k


@pytest.fixture
def scan_calls(monkeypatch):
    """Counts of the scanner's answers: blocks read, blocks given back to msgspec."""
    calls = {"read": 0, "bailed": 0}
    real = reader._scan.scan

    def counting(*args):
        out = real(*args)
        calls["bailed" if out is None else "read"] += 1
        return out

    monkeypatch.setattr(reader._scan, "scan", counting)
    return calls


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("adherence", [True, False])
def test_scanned_logs_equal_a_plain_json_reference(write_jsonl, scan_calls, seed, adherence):
    """Messy but plain records (every field, aliases, shorthand, scores, answers) read by the scanner match json.loads."""
    path = write_jsonl(_messy_records(np.random.default_rng(seed), 400))
    runs_ = load_runs([path], library=_LIB, adherence=adherence)
    assert scan_calls == {"read": 1, "bailed": 0}
    assert_matches_reference(runs_, _reference(path, _CODE, adherence=adherence))


# -------------------------------------------------------------- differential fuzzing against msgspec
_NUMBERS = ["0", "-0", "1", "7", "-3", "0.5", "-0.0", "1e-05", "2.5E+3", "1e400", "-1e400", "1e-400",
            "123456789012345678", "1234567890123456789012", "0.1234567890123456789", "3.000", "5e-324",
            "1.7976931348623157e308", "00", "01", "1.", ".5", "-", "1e", "+1", "0x10", "NaN", "Infinity"]
_STRINGS = ['"s1"', '"s\\u0031"', '"\\ud83d\\ude00"', '"\\ud800"', '"\\udc00x"', '"caf\u00e9"', '"tab\\there"',
            '"a\\/b"', '"bad\\x"', '""', '"\u2028"']


def _value(rng: random.Random, depth: int = 0) -> str:
    kind = rng.randrange(9 if depth < 3 else 5)
    if kind == 0:
        return rng.choice(_NUMBERS)
    if kind == 1:
        return rng.choice(_STRINGS)
    if kind == 2:
        return rng.choice(["true", "false", "null", "tru", "nul"])
    if kind in (3, 4):
        return json.dumps(rng.choice(["x", 3, 2.5, None, True]))
    if kind in (5, 6):
        return "[" + ", ".join(_value(rng, depth + 1) for _ in range(rng.randrange(3))) + "]"
    keys = ['"id"', '"score"', '"skills"', '"k"', '"model"']
    return "{" + ",".join(f"{rng.choice(keys)}:{_value(rng, depth + 1)}" for _ in range(rng.randrange(3))) + "}"


def _mutate(line: str, rng: random.Random) -> str:
    """One random change: most keep the line valid JSON, many make a field the wrong type."""
    op = rng.randrange(12)
    i = rng.randrange(len(line) + 1)
    if op == 0:
        return line[:i] + rng.choice(' \t\r,:{}[]"\\0a\x00\x01\u00e9') + line[i:]
    if op == 1 and line:
        return line[:i] + line[i + 1:]
    if op == 2:  # a repeated or unknown key first
        key = rng.choice(["model", "task_id", "condition", "correct", "epoch", "retrievals", "retrieved",
                          "invoked", "error", "benchmark", "answer", "mod\\u0065l", "extra", "use_logged",
                          "use\\u005flogged"])
        return '{"' + key + '":' + _value(rng) + "," + line[1:]
    if op in (3, 8, 9, 10):  # a field's value replaced
        key = rng.choice(["task_id", "condition", "correct", "epoch", "model", "retrievals", "retrieved",
                          "invoked", "error", "score", "id", "skills"])
        j = line.find(f'"{key}":')
        if j >= 0:
            k = j + len(key) + 3
            end = k
            depth = 0
            while end < len(line):  # the end of a simple or nested value (strings without , ] })
                ch = line[end]
                if ch in "[{":
                    depth += 1
                elif ch in "]}":
                    if depth == 0:
                        break
                    depth -= 1
                elif ch == "," and depth == 0:
                    break
                end += 1
            return line[:k] + _value(rng) + line[end:]
    if op == 4:
        return " " * rng.randrange(3) + line + rng.choice(["", " ", "\r", "\t "])
    if op == 5:
        return line.replace(",", " , ", rng.randrange(1, 4)).replace(":", ": ", rng.randrange(1, 4))
    if op == 6:
        return rng.choice(["", "   ", "[]", "null", "1", '"x"', line + line])
    if op == 7:  # deep nesting in an ignored field
        d = rng.choice([3, 70, 200])
        return '{"deep":' + "[" * d + "]" * d + "," + line[1:]
    return line


def _block(rng: random.Random, n: int) -> bytes:
    recs = _messy_records(np.random.default_rng(rng.randrange(1 << 30)), n)
    lines = []
    for rec in recs:
        rec = dict(rec)
        if rng.random() < 0.3:
            rec["meta"] = {"latency_s": rng.choice([1.5, 1e-05, 120, -0.0]), "tokens": rng.randrange(1 << 20),
                           "note": rng.choice(["ok", "caf\u00e9 \u2603", "tab\there", "q\"uote", "\U0001f600"])}
        if rng.random() < 0.2:
            rec["answer"] = rng.choice(["def f():\n    return 1\n", "\u00fcber", None, {"code": "x"}, "",
                                        f"x = 1\n    {_CODE}\n", "uses s3", "\u00e9 s3 \t"])
        if rng.random() < 0.2:
            rec["error"] = rng.choice([None, False, 0, "", {}, [], "timeout", {"type": "x"}])
        if rng.random() < 0.15:  # offered, use not logged: blocks holding it bypass the scanner
            rec["use_logged"] = rng.choice([False, False, True, None, "no", 0])
            if rng.random() < 0.7:
                rec["offered"] = rng.choice([["s1", "s2"], [], ["t/skills"], "s1", [1]])
        if rng.random() < 0.2:  # ids that JSON escapes (always, or only with ensure_ascii)
            odd = rng.choice(["caf\u00e9", 'q"t', "back\\slash", "tab\t", "\u2603", "sl/sh"])
            field = rng.choice(["task_id", "model", "benchmark", "skill"])
            if field == "skill":
                rec["retrieved"] = [*(rec.get("retrieved") or []), odd]
            else:
                rec[field] = f"{rec[field]}{odd}" if field == "task_id" else odd
        keys = list(rec)
        rng.shuffle(keys)
        sep = rng.choice([(",", ":"), (", ", ": ")])
        text = json.dumps({k: rec[k] for k in keys}, separators=sep, ensure_ascii=rng.random() < 0.5)
        lines.append(_mutate(text, rng) if rng.random() < 0.3 else text)
    tail = "" if rng.random() < 0.2 else "\n"
    return ("\n".join(lines) + tail).encode("utf-8", "surrogatepass")


def test_scanner_reads_every_block_as_msgspec_and_the_exact_path_do():
    """On 3,000 random blocks with mutated lines, the scanner's records, vocabularies and errors equal the other paths'."""
    rng = random.Random(20261203)
    read = bailed = errors = 0
    for _ in range(3000):
        blob = _block(rng, rng.choice([2, 2, 4, 10]))
        if rng.random() < 0.05:
            blob = blob.replace(b"s1", b"s\xff", 1)  # invalid UTF-8
        adherence = rng.random() < 0.5
        got, want = _read(blob, True, adherence), _read(blob, False, adherence)
        assert got[0] == want[0]
        _assert_same_part(got[1], want[1])
        errors += want[1]["error"] is not None
        st = reader._State(records._CodeLines(None), adherence=False)
        if reader._scan.scan(blob, st.models, st.benches, st.tasks, st.skills, st.tables) is None:
            bailed += 1
            assert not any((st.models, st.benches, st.tasks, st.skills))  # nothing left interned
        else:
            read += 1
    # both outcomes are exercised: plain blocks are read in C, odd ones fall back (some to an error)
    assert read > 300 and bailed > 300 and errors > 100


def test_scores_are_the_numbers_msgspec_reads():
    """Every number form the scanner accepts as a score gives the double msgspec gives (correctly rounded)."""
    rng = random.Random(7)
    forms = [lambda x: repr(x), lambda x: f"{x:.17g}", lambda x: f"{x:.3e}", lambda x: f"{x:.15f}",
             lambda x: str(int(x * 1000)), lambda x: f"{x:.6g}".upper()]
    lines = []
    for i in range(3000):
        x = rng.choice([rng.uniform(-50, 50), rng.lognormvariate(0, 20), rng.random() * 1e-300])
        score = rng.choice(forms)(x)
        lines.append(f'{{"task_id":"t{i}","condition":"on","correct":true,'
                     f'"retrievals":[{{"skills":[{{"id":"s","score":{score}}}]}}]}}')
    st = reader._State(records._CodeLines(None), adherence=False)
    accepted = 0
    for line in lines:
        cols = reader._scan.scan(line.encode(), st.models, st.benches, st.tasks, st.skills, st.tables)
        want = reader._decode_core(line.encode()).retrievals[0].skills[0].score
        if cols is not None:  # not given back for being over 40 characters or an integer over 18 digits
            accepted += 1
            assert np.frombuffer(cols[11], np.float64).tolist() == [want], line
    assert accepted > 2500


def test_a_bail_late_in_a_block_leaves_the_vocabularies_as_they_were():
    """A block with a line the scanner cannot read interns nothing, though earlier lines had new ids."""
    st = reader._State(records._CodeLines(None), adherence=False)
    good = b'{"task_id":"a","condition":"on","correct":1,"model":"m","retrieved":["x","y"]}\n'
    assert reader._scan.scan(good, st.models, st.benches, st.tasks, st.skills, st.tables) is not None
    before = [dict(v) for v in (st.models, st.benches, st.tasks, st.skills)]
    bad = (b'{"task_id":"b","condition":"on","correct":1,"model":"m2","retrieved":["z","x"]}\n'
           b'{"task_id":"c","condition":"on","correct":2}\n')
    assert reader._scan.scan(bad, st.models, st.benches, st.tasks, st.skills, st.tables) is None
    assert [dict(v) for v in (st.models, st.benches, st.tasks, st.skills)] == before
    # and its id caches know nothing of them: "z" gets the next free id, "x" keeps its own
    again = b'{"task_id":"b","condition":"on","correct":1,"model":"m2","retrieved":["z","x"]}\n'
    cols = reader._scan.scan(again, st.models, st.benches, st.tasks, st.skills, st.tables)
    assert np.frombuffer(cols[10], np.int64).tolist() == [2, 0]
    assert st.skills == {"x": 0, "y": 1, "z": 2} and st.models == {"m": 0, "m2": 1}


@pytest.mark.parametrize("kind", ["plain", "gzip", "range"])
@pytest.mark.parametrize("tail", ["\n", ""])
def test_blocks_are_whole_lines_whatever_the_block_size(tmp_path, monkeypatch, kind, tail):
    """Blocks end at line ends (long lines included) and, joined, give back the file or its byte range."""
    monkeypatch.setattr(reader, "_BLOCK", 64)
    rng = random.Random(3)
    text = "\n".join("x" * rng.choice([0, 5, 63, 64, 65, 200]) for _ in range(60)) + tail
    data = text.encode()
    path = tmp_path / ("f.jsonl.gz" if kind == "gzip" else "f.jsonl")
    path.write_bytes(gzip.compress(data) if kind == "gzip" else data)
    _, fh = records._open(str(path))
    with fh:
        if kind == "range":
            begin, end = reader._line_start_at(fh, 300), reader._line_start_at(fh, 2000)
            fh.seek(begin)
            blocks = [bytes(b) for b in reader._blocks(fh, True, end - begin)]
            want = data[begin:end]
        else:
            blocks = [bytes(b) for b in reader._blocks(fh, kind == "plain", -1)]
            want = data
    assert b"".join(blocks) == want
    assert all(b.endswith(b"\n") for b in blocks[:-1]) and all(blocks)
    assert sum(len(io.BytesIO(b).readlines()) for b in blocks) == len(io.BytesIO(want).readlines())


def test_commands_give_the_same_results_without_the_scanner(write_jsonl, monkeypatch):
    """Reading with or without the C scanner gives the same pairs (the pure-Python install is equivalent)."""
    from test_runs_parallel import assert_same

    paths = [write_jsonl([{**r, "task_id": f"f{s}/{r['task_id']}"} for r in _messy_records(np.random.default_rng(s), 300)],
                         f"r{s}.jsonl") for s in range(3)]
    lib = Library(skills=(Skill(id="s3", name="s3", description="d", body="b"),))
    with_c = load_runs(paths, library=lib, adherence=False)
    monkeypatch.setattr(reader, "_scan", None)
    assert_same(with_c, load_runs(paths, library=lib, adherence=False))


_BASE = '"task_id":"t","condition":"on","correct":true'
_EDGES = [
    # fields of the wrong type or out of range
    *(f'{{{_BASE},"epoch":{v}}}' for v in ["0", "-1", "1.0", "1e0", "01", "9223372036854775807", "true", "null",
                                           '"1"', "2"]),
    *(f'{{"task_id":"t","condition":"on","correct":{v}}}' for v in ["2", "-0", "1.0", '"true"', "null", "0", "1"]),
    *(f'{{"task_id":{v},"condition":"on","correct":true}}' for v in ['""', "null", "1", '"a\\u0000b"', '"\\t"']),
    *(f'{{{_BASE},"model":{v}}}' for v in ["null", "1", "[]", '"m"', '"m\\n"']),
    *(f'{{"task_id":"t","condition":{v},"correct":true}}' for v in ['"Enabled"', '"enabled "', '"skills_off"',
                                                                    '"o\\u006e"', "1"]),
    *(f'{{{_BASE},"invoked":{v}}}' for v in ["2", '"yes"', "null", "0", "1", "true"]),
    *(f'{{{_BASE},"retrieved":{v}}}' for v in ['["a", 1]', '"a"', "null", "[]", '["a","a"]', '[{"id":"a"}]']),
    *(f'{{{_BASE},"retrievals":{v}}}' for v in [
        '[{"skills":[{"score":1}]}]', '[{"skills":[{"id":null}]}]', '[{"skills":[{"id":"a","score":"1"}]}]',
        '[{"skills":[{"id":"a","score":true}]}]', '[{"skills":[{"id":"a","score":1e400}]}]',
        '[{"skills":[{"id":"a","score":-1e400}]}]', '[{"skills":[{"id":"a","score":NaN}]}]',
        '[{"skills":[{"id":"a","id":"b"}]}]', '[{"skills":["a"],"skills":["b"]}]', '[null]', '["a"]', "{}",
        '[{"skills":"a"}]', '[{}]', "[]", "null", '[{"skills":null}]', '[{"skills":[1]}]',
        '[{"skills":[{"id":"a","score":1,"rank":1,"extra":{"x":[1,2]}}]}]']),
    # control characters, escapes, keys, nesting, whole-line shape
    '{"task_id":"a\x01b","condition":"on","correct":true}', f'{{{_BASE},"answer":"a\x1fb"}}',
    f'{{{_BASE},"answer":"tab\there"}}', f'{{{_BASE},"answer":"\\q"}}', f'{{{_BASE},"answer":"\\u12"}}',
    '{"task\\u005fid":"t","condition":"on","correct":true}', f'{{{_BASE},"a\\u0062c":1}}',
    f'{{{_BASE},"retrievals":[],"retrievals":[{{"skills":["a"]}}]}}',
    f'{{{_BASE},"retrievals":[{{"skills":["a"]}}],"retrievals":[]}}', f'{{{_BASE},"model":"a","model":"b"}}',
    f'{{{_BASE},"deep":{"[" * 63 + "]" * 63}}}', f'{{{_BASE},"deep":{"[" * 64 + "]" * 64}}}',
    f'{{{_BASE},"deep":{"[" * 2000 + "]" * 2000}}}', "{}", "[]", f"{{{_BASE}}} x", f"{{{_BASE}}}{{{_BASE}}}",
    f"{{{_BASE},}}", f"{{{_BASE}", f" \t{{{_BASE}}}\r", f"{{ {_BASE} , \"x\" : [ 1 , 2 ] }}",
    f'{{{_BASE},"n":-}}', f'{{{_BASE},"n":1.}}', f'{{{_BASE},"n":.5}}', f'{{{_BASE},"n":1e}}',
    f'{{{_BASE},"n":123456789012345678901234567890}}', f'{{{_BASE},"n":1e400}}', f'{{{_BASE},"n":[1,]}}',
    f'{{{_BASE},"n":tru}}', f'{{{_BASE},"n":nulls}}', f'{{{_BASE},"n":"\\ud800"}}', f'{{{_BASE},"n":"\\udc00"}}',
    f'{{{_BASE},"n":"\\ud83d\\ude00"}}', f'{{{_BASE},"n":"\\ud83dx"}}',
    f'{{{_BASE},"use_logged":false,"offered":["a"]}}', f'{{{_BASE},"use\\u005flogged":false}}',
    f'{{{_BASE},"use_logged":"no"}}', f'{{{_BASE},"offered":"a"}}', f'{{{_BASE},"use_logged":false}}',
]


@pytest.mark.parametrize("line", _EDGES)
def test_edge_lines_read_as_the_other_paths_read_them(line):
    """Each odd line, alone and after a plain one, gives the same records or the same error with or without the scanner."""
    plain = '{"task_id":"p","condition":"off","correct":true}'
    for blob in (line.encode(), f"{plain}\n{line}\n".encode()):
        for adherence in (False, True):
            got, want = _read(blob, True, adherence), _read(blob, False, adherence)
            assert got[0] == want[0]
            _assert_same_part(got[1], want[1])


# ---------------------------------------------------------------- the cost columns (_scan.costs)
_COST_VALUES = {
    "model": [None, '"m1"', '"m2"', "null", "1", '"m\\n"', '"m\u00e9"'],
    "benchmark": [None, '"b1"', "null", '"b2"'],
    "epoch": [None, "1", "2", "3", "null", "1.0", "-3"],
    "condition": ['"enabled"', '"disabled"', '"on"', '"off"', "null", "1", '"enabled "', '"en\\u0061bled"'],
    "correct": ["true", "false", "null", "0", "1", '"yes"', "2"],
    "arm": [None, None, None, "null", '"mask"', "{}"],
    "error": [None, None, None, "null", '"boom"', "false", '""'],
    "score": [None, "null", "0.5", "1", "true", '"0.5"', "1e-5", "1.5e300", "12345678901234567890", "-0.0",
              "0.1234567890123456789"],
}
_CALL_ERRORS = [None, "null", "false", "true", "0", "0.0", "-0", "1", "2.5e-3", '""', '"e"', "[]", "[1]", "{}",
                '{"a":1}', "[ ]", "{ }"]
_SKILL_ITEMS = ['"a"', '"b"', '"c"', '{"id":"a"}', '{"id":"d","score":1.5}', '{"id":1}', '{"x":1}', "1", "null",
                '"s\\u0062"', '{"id":"a","id":"b"}', "[]"]
_USAGE_FIELDS = {
    "prompt_tokens": [None, "null", "10", "-3", "true", "1.5", '"7"', "0"],
    "completion_tokens": [None, "null", "4", "0", "false", "true", "2.5", '"3"'],
    "cached_tokens": [None, None, "null", "3", "-1", "2.0", '"x"', "0"],
    "prompt_tokens_details": [None, None, "null", '{"cached_tokens":5}', '{"cached_tokens":null}',
                              '{"cached_tokens":-2}', '{"audio_tokens":1}', "5", "{}"],
}
_META_FIELDS = {
    "latency_s": [None, "null", "1", "1.5", "true", "false", '"2"', "1e2"],
    "timeout": [None, "null", '"agent"', '"verifier"', "5", '"a\\u0062"', '"\u00e9t\u00e9"'],
    "cost_usd": [None, "null", "0.1", "3", "true", '"x"'],
    "turns": [None, "null", "7", "2.5", "false"],
}


def _cost_line(rng: random.Random, i: int) -> str:
    def obj(fields: dict[str, list], extra: list[str]) -> str:
        # the first four values of each field are ones the scanner reads; the others are rare
        members = [f'"{k}":{v}' for k, vals in fields.items()
                   if (v := rng.choice(vals if rng.random() < 0.03 else vals[:4])) is not None] + extra
        rng.shuffle(members)
        sep = rng.choice([",", ", ", " ,\t"])
        return "{" + sep.join(members) + "}"

    fields = {k: v for k, v in _COST_VALUES.items()}
    extra = [f'"task_id":"t{rng.randrange(6)}"', f'"answer":{json.dumps("x" * rng.randrange(40) + chr(10))}']
    if rng.random() < 0.2:  # a field no path reads, with numbers only Python converts (1e400: not finite)
        extra.append('"other":' + rng.choice(["1e5", "[2.5E-3,1]", '{"n":-1e+2}', "1e400", "123456789012345678901"]))
    r = rng.random()
    if r < 0.7:
        calls = []
        for _ in range(rng.randrange(4)):
            call = []
            if rng.random() < 0.9:
                call.append('"skills":' + rng.choice(["null", "[]", '"ab"' if rng.random() < 0.1 else "null",
                                                      "[" + ",".join(rng.choices(_SKILL_ITEMS[:9] if rng.random() < 0.8
                                                                                 else _SKILL_ITEMS, k=rng.randrange(1, 5))) + "]"]))
            if (e := rng.choice(_CALL_ERRORS)) is not None:
                call.append(f'"error":{e}')
            call.append('"query":"q"')
            rng.shuffle(call)
            calls.append(rng.choice(["{" + ",".join(call) + "}"] * 8 + ['"x"', "null"]))
        extra.append('"retrievals":[' + ",".join(calls) + "]")
    elif r < 0.8:
        extra.append('"retrievals":' + rng.choice(["null", '"abc"', "{}", "[]", "{\"skills\":[\"a\"]}"]))
    m = rng.random()
    if m < 0.75:
        meta_extra = ['"tokens":512']
        u = rng.random()
        if u < 0.7:
            meta_extra.append('"usage":' + obj(_USAGE_FIELDS, ['"total_tokens":9'] if rng.random() < 0.3 else []))
        elif u < 0.8:
            meta_extra.append('"usage":' + rng.choice(["null", "5", '"x"', "[]"]))
        extra.append('"meta":' + obj(_META_FIELDS, meta_extra))
    elif m < 0.85:
        extra.append('"meta":' + rng.choice(["null", '"x"', "5", "[]"]))
    line = obj(fields, extra)
    if rng.random() < 0.03:  # a repeated key
        line = line[:-1] + "," + rng.choice(['"meta":{}', '"model":"m9"', '"score":1']) + "}"
    return line


def _costs_of(blob: bytes, scanner: bool) -> dict | Exception:
    from skillaudit.runs import costs, inputs

    table = costs.CostTable()
    saved = inputs._scan
    try:
        if not scanner:
            inputs._scan = None
        inputs._add_costs(blob, table)
        return table.freeze().frozen
    except Exception as exc:  # what the other paths do with a shape they cannot read
        return exc
    finally:
        inputs._scan = saved


def test_cost_columns_equal_what_msgspec_and_the_dict_path_read():
    """On 3,000 random blocks of records with every kind of cost field (odd types, nulls, escapes,
    repeated keys, failed calls), the C cost columns equal the other paths' table, or the scanner
    gives the block back (the other paths then read it, or fail, as before)."""
    from skillaudit.runs import _scan

    rng = random.Random(20261207)
    read = bailed = 0
    for _ in range(3000):
        lines = [_cost_line(rng, i) for i in range(rng.choice([1, 2, 4, 8]))]
        blob = ("\n".join(lines) + rng.choice(["\n", ""])).encode()
        want = _costs_of(blob, scanner=False)
        if _scan.costs(blob) is None:
            bailed += 1
            continue
        read += 1
        assert not isinstance(want, Exception), (blob, want)
        got = _costs_of(blob, scanner=True)
        assert got.keys() == want.keys()
        for k, x in got.items():
            y = want[k]
            if isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), (k, blob)
                if x.dtype.kind == "f":  # -0.0 and 0.0 too
                    assert np.array_equal(np.signbit(x), np.signbit(y)), (k, blob)
            else:
                assert x == y and [type(v) for v in x] == [type(v) for v in y] if isinstance(x, list) else x == y, (k, blob)
    assert read > 600 and bailed > 600


def test_cost_columns_span_blocks_in_first_seen_order():
    """Ids interned block by block from the scanner's columns keep the order a record-at-a-time reader gives."""
    from skillaudit.runs import costs, inputs

    rng = random.Random(5)
    blobs = [("\n".join(_cost_line(rng, i) for i in range(6)) + "\n").encode() for _ in range(400)]
    blobs = [b for b in blobs if inputs._scan.costs(b) is not None]
    with_c, without = costs.CostTable(), costs.CostTable()
    saved = inputs._scan
    for b in blobs:
        inputs._add_costs(b, with_c)
    try:
        inputs._scan = None
        for b in blobs:
            inputs._add_costs(b, without)
    finally:
        inputs._scan = saved
    a, b = with_c.freeze().frozen, without.freeze().frozen
    assert len(blobs) > 50 and a["models"] == b["models"] and a["skills"] == b["skills"]
    assert a["timeouts"] == b["timeouts"] and np.array_equal(a["m"], b["m"]) and np.array_equal(a["t"], b["t"])
    assert np.array_equal(a["shown_skill"], b["shown_skill"]) and np.array_equal(a["shown_rec"], b["shown_rec"])
