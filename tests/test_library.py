"""Skill libraries: Agent Skills folders and JSON Lines, lenient load and strict validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _factories import make_skill

from skillaudit.errors import LibraryError
from skillaudit.library import load_library, split_front_matter, validate_library

REPO = Path(__file__).resolve().parents[1]


def test_loads_folder_of_skill_md(tmp_path):
    """Each <name>/SKILL.md becomes a Skill whose id is its name, sorted by id."""
    make_skill(tmp_path, "zeta", "Z skill.", "Body z\n", extra="license: MIT\nmetadata:\n  domain: math\n")
    make_skill(tmp_path, "alpha", "A skill.", "Body a\n")
    lib = load_library(tmp_path)
    assert lib.ids == ("alpha", "zeta")
    z = lib.get("zeta")
    assert z.description == "Z skill." and z.body == "Body z" and z.license == "MIT"
    assert z.metadata == {"domain": "math"}
    assert lib.warnings == ()


def test_content_hash_changes_with_content(tmp_path):
    """The content hash is stable for equal content and changes when the body changes."""
    make_skill(tmp_path / "a", "s", "d", "one\n")
    make_skill(tmp_path / "b", "s", "d", "one\n")
    make_skill(tmp_path / "c", "s", "d", "two\n")
    h = [load_library(tmp_path / x).get("s").content_hash for x in "abc"]
    assert h[0] == h[1] != h[2] and len(h[0]) == 64


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Bad_Name", "name 'Bad_Name' must be lowercase letters, digits and single hyphens, not starting or ending with a hyphen"),
        ("-lead", "name '-lead' must be lowercase letters, digits and single hyphens, not starting or ending with a hyphen"),
        ("a--b", "name 'a--b' must be lowercase letters, digits and single hyphens, not starting or ending with a hyphen"),
        ("x" * 65, f"name '{'x' * 65}' is longer than 64 characters"),
    ],
)
def test_name_rules(tmp_path, name, message):
    """Names follow the Agent Skills rules: a-z0-9 and single hyphens, at most 64 characters."""
    make_skill(tmp_path, name)
    problems = [p.message for p in validate_library(tmp_path)]
    assert message in problems


def test_name_must_match_folder_and_description_rules(tmp_path):
    """A name differing from its folder, and an empty or over-long description, are problems."""
    folder = tmp_path / "right"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: wrong\ndescription: ''\n---\nbody\n")
    long = make_skill(tmp_path, "long", "x" * 1025)
    msgs = {str(p) for p in validate_library(tmp_path)}
    assert f"{folder / 'SKILL.md'}: name 'wrong' does not match its folder 'right'" in msgs
    assert f"{folder / 'SKILL.md'}: front matter needs a non-empty string 'description'" in msgs
    assert f"{long}: description is 1025 characters; at most 1024" in msgs


def test_lenient_load_skips_broken_skills_with_warnings(tmp_path):
    """A skill without front matter or with broken YAML is skipped with a warning; others load."""
    make_skill(tmp_path, "good")
    (tmp_path / "nofm").mkdir()
    (tmp_path / "nofm" / "SKILL.md").write_text("just text\n")
    (tmp_path / "badyaml").mkdir()
    (tmp_path / "badyaml" / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody\n")
    lib = load_library(tmp_path)
    assert lib.ids == ("good",)
    assert any("no YAML front matter" in w for w in lib.warnings)
    assert any("invalid YAML front matter" in w for w in lib.warnings)


def test_unknown_field_is_a_validation_problem_but_loads(tmp_path):
    """Fields outside the Agent Skills spec are reported but the skill still loads."""
    make_skill(tmp_path, "s", extra="author: me\n")
    assert [p.message for p in validate_library(tmp_path)] == ["unknown front-matter field 'author'"]
    assert load_library(tmp_path).ids == ("s",)


def test_jsonl_library(tmp_path):
    """A JSON Lines library of {id, name, description, body} loads like a folder."""
    path = tmp_path / "lib.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "b-skill", "name": "b-skill", "description": "B", "body": "bb"},
        {"id": "a-skill", "name": "a-skill", "description": "A", "body": "aa"},
    ]) + "\n{oops\n")
    lib = load_library(path)
    assert lib.ids == ("a-skill", "b-skill")
    assert lib.warnings == (f"{path}:3: invalid JSON",)


def test_missing_library_is_an_error(tmp_path):
    """A path that does not exist raises LibraryError naming it."""
    with pytest.raises(LibraryError, match="no such skill library"):
        load_library(tmp_path / "absent")


def test_front_matter_split():
    """The YAML block between the first two '---' lines is split from the body."""
    fm, body, line = split_front_matter("---\nname: a\n---\nhello\n")
    assert fm == "name: a\n" and body == "hello\n" and line == 4
    assert split_front_matter("no front matter")[0] is None


def test_bundled_sample_library_is_valid():
    """The sample library in skills/ passes strict validation."""
    assert validate_library(REPO / "skills") == []
    assert len(load_library(REPO / "skills")) >= 20


def test_plain_front_matter_shortcut_equals_yaml():
    """Whenever the `key: text` shortcut accepts front matter, it gives exactly yaml.safe_load's mapping."""
    import random
    import string

    import yaml

    from skillaudit.library import _simple_front_matter

    rng = random.Random(0)
    alphabet = string.ascii_letters + string.digits + " :#-_'\"!&*|>%@`[]{},.?\t~"
    words = ["yes", "No", "TRUE", "null", "off", "On", "y", "n", "~", "1.5", "0x1f", "2020-01-01", ".inf"]
    accepted = 0
    for _ in range(30_000):
        lines = []
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(["name", "description", "license", "x-y", "_k", "name"])
            val = rng.choice(words) if rng.random() < 0.2 else "".join(
                rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
            lines.append(f"{key}: {val}")
        text = "\n".join(lines) + "\n"
        got = _simple_front_matter(text)
        if got is not None:
            accepted += 1
            assert yaml.safe_load(text) == got, text
    assert accepted > 3000  # the shortcut is actually exercised
    assert _simple_front_matter("name: a\ndescription: yes\n") is None
    assert _simple_front_matter("name: a\nmetadata:\n  k: v\n") is None


def test_folder_scan_skips_what_is_not_a_skill_and_spells_paths_like_pathlib(tmp_path, monkeypatch):
    """Hidden folders, plain files, folders without SKILL.md and a SKILL.md that is a folder or a
    FIFO are skipped; a symlinked folder is read; skill paths are spelled as pathlib spells them."""
    import os

    make_skill(tmp_path, "beta", "B skill.", "Body b\n")
    make_skill(tmp_path, "alpha", "A skill.", "Body a\n")
    make_skill(tmp_path, ".hidden", "H skill.", "Body h\n")
    (tmp_path / "plain.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "dir-md" / "SKILL.md").mkdir(parents=True)
    if hasattr(os, "mkfifo"):
        (tmp_path / "fifo").mkdir()
        os.mkfifo(tmp_path / "fifo" / "SKILL.md")
    (tmp_path / "linked").symlink_to(tmp_path / "alpha")
    monkeypatch.chdir(tmp_path)
    for spelling in (".", "./", str(tmp_path) + "/"):
        lib = load_library(spelling)
        assert [s.path for s in lib] == [str(Path(spelling) / n / "SKILL.md") for n in ("alpha", "beta")]
        assert lib.warnings == (
            f"{Path(spelling) / 'linked' / 'SKILL.md'}: name 'alpha' does not match its folder 'linked'",
            f"{Path(spelling) / 'linked' / 'SKILL.md'}: duplicate skill id 'alpha' (also "
            f"{Path(spelling) / 'alpha' / 'SKILL.md'})",
        )
