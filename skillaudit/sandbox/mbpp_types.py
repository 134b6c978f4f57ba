"""MBPP+ inputs as the scorer runs them: EvalPlus stores tuples, sets and complex numbers as JSON
lists and strings; `mbpp_deserialize_inputs` restores the types (scoring needs it, so it lives with
the scorer; `skillaudit.tasks.benchmarks` re-exports it)."""

from __future__ import annotations

from typing import Any

# EvalPlus stores tuples, sets and complex numbers as JSON lists/strings; this mirrors its
# `mbpp_deserialize_inputs` so that canonical and candidate solutions see the intended types.
_T_EACH_ARG = {2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616,
               630, 726, 740, 744, 809}
_T_NESTED = {63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780}
_T_FIRST_NESTED = {75, 413, 444, 753}
_T_SECOND = {106, 750}
_T_FIRST = {250, 405, 446, 617, 720, 763, 808}
_T_NESTED_THEN_EACH = {259, 401, 445}
_T_ALL = {580, 615, 791}


def _all_tuples(x: Any) -> Any:
    return tuple(_all_tuples(i) for i in x) if isinstance(x, list) else x


def mbpp_deserialize_inputs(task_id: str, inputs: list[Any]) -> list[Any]:
    """Restore the Python types of MBPP+ inputs (tuples, sets, complex) as EvalPlus does."""
    try:
        n = int(str(task_id).rsplit("/", 1)[-1])
    except ValueError:
        return inputs
    if n in _T_EACH_ARG:
        return [[tuple(a) for a in inp] for inp in inputs]
    if n in _T_NESTED:
        return [[[tuple(x) for x in a] for a in inp] for inp in inputs]
    if n in _T_FIRST_NESTED:
        return [[[tuple(x) for x in inp[0]], inp[1]] for inp in inputs]
    if n in _T_SECOND:
        return [[inp[0], tuple(inp[1])] for inp in inputs]
    if n == 115:
        return [[[set(x) if isinstance(x, list) and x else {} for x in inp[0]]] for inp in inputs]
    if n == 124:
        return [(float(inp[0]), complex(inp[1])) for inp in inputs]
    if n in _T_FIRST:
        return [[tuple(inp[0]), inp[1]] for inp in inputs]
    if n in _T_NESTED_THEN_EACH:
        return [[tuple(tuple(x) for x in a) for a in inp] for inp in inputs]
    if n == 278:
        return [[tuple(tuple(x) if isinstance(x, list) else x for x in inp[0])] for inp in inputs]
    if n == 307:
        return [[tuple(inp[0]), inp[1], inp[2]] for inp in inputs]
    if n == 722:
        return [[{k: tuple(v) for k, v in inp[0].items()}, *inp[1:]] for inp in inputs]
    if n == 252:
        return [[complex(inp[0])] for inp in inputs]
    if n in _T_ALL:
        return [_all_tuples(inp) for inp in inputs]
    return inputs
