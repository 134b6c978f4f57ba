"""Plain-JSON conversion of results (skillaudit.util.files.jsonable)."""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from pathlib import Path

import numpy as np

from skillaudit.util.files import jsonable


class _Label(enum.StrEnum):
    A = "a"


def test_jsonable_gives_plain_json_types():
    """Tuples become lists, numpy values Python ones, non-finite floats None, keys and paths strings."""
    doc = {
        "ints": (1, True, None), 2: [0.5, math.nan, -math.inf],
        "np": [np.float32(0.25), np.int64(7), np.bool_(True), np.array([1.0, np.nan])],
        "path": Path("a/b"), "sub": OrderedDict([(3, (np.float64(np.inf),))]), "label": _Label.A,
    }
    out = jsonable(doc)
    assert out == {"ints": [1, True, None], "2": [0.5, None, None], "np": [0.25, 7, True, [1.0, None]],
                   "path": "a/b", "sub": {"3": [None]}, "label": _Label.A}
    assert type(out["np"][0]) is float and type(out["np"][1]) is int and type(out["np"][2]) is bool
    assert type(out["sub"]) is dict and type(out["ints"]) is list


def test_dumps_json_writes_what_the_plain_copy_writes():
    """dumps_json gives the bytes of orjson.dumps(jsonable(doc)) for numpy values, non-finite floats, paths, non-string keys and a key orjson cannot write."""
    import orjson

    from skillaudit.util.files import dumps_json

    doc = {
        "ints": (1, True, None), 2: [0.5, math.nan, -math.inf, 1e-300],
        "np": [np.float32(0.1), np.int64(7), np.bool_(True), np.array([[1.0, np.nan]]), np.float64(0.3)],
        "path": Path("a/b"), "sub": OrderedDict([(3, (np.float64(np.inf),))]), "label": _Label.A,
        "text": "é <b>&</b> \u2028",
    }
    for indent in (True, False):
        option = orjson.OPT_INDENT_2 if indent else 0
        assert dumps_json(doc, indent) == orjson.dumps(jsonable(doc), option=option)
        odd = {**doc, (1, 2): "tuple key"}
        assert dumps_json(odd, indent) == orjson.dumps(jsonable(odd), option=option)
