"""Issue 54: the layout refactor moves code, not values. audit.json, skills.csv and every command's
--json on the bundled sample, a simulated 45-skill 3-model library and the imported SkillsBench
registry equal the goldens written before it (tests/_golden.py: words and added `method` fields
excepted; every other value equal)."""

from __future__ import annotations

import gzip

from _golden import GOLDEN, outputs, parse, same


def test_every_output_equals_its_golden(tmp_path):
    seen = set()
    problems = []
    for inp, name, data in outputs(tmp_path):
        path = GOLDEN / inp / f"{name}.gz"
        assert path.is_file(), f"{path}: no golden (python tests/_golden.py --write)"
        seen.add(path)
        old = parse(name, gzip.decompress(path.read_bytes()))
        problems += [f"{inp}/{name}: {d}" for d in same(old, parse(name, data))[:5]]
    assert not problems, "\n".join(problems[:40])
    assert seen == set(GOLDEN.glob("*/*.gz"))


def test_the_equivalence_tells_words_from_values():
    assert same({"a": 1.0, "b": "x y", "c": "id"}, {"a": 1.0 + 1e-12, "b": "z", "c": "id", "method": "m"}) == []
    assert same({"a": [1, 2]}, {"a": [1, 3]}) == ["$.a[1]: 2 -> 3"]
    assert same({"a": "id", "b": 1}, {"a": "other"}) == ["$.a: 'id' -> 'other'", "$.b: missing"]
    assert same({"t": True}, {"t": 1}) == ["$.t: True -> 1"]
