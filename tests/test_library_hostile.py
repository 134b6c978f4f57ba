"""Hostile skill libraries (issue 16, items 7-8): YAML alias bombs, links, special and unreadable
files in `validate`, `rank`, `prune --apply` and `audit`: one line, never a traceback, in seconds."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _factories import make_skill, pair
from click.testing import CliRunner

from skillaudit import library as library_mod
from skillaudit.cli import cli
from skillaudit.library import load_library, validate_library
from skillaudit.runs.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]


def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "".join(f"  {line}\n" for line in lines)


def _bomb_library(root: Path) -> Path:
    lib = root / "skills"
    make_skill(lib, "good", extra="allowed-tools: Bash(git:*) Read\n")
    folder = lib / "bomb"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: bomb\ndescription: An alias bomb.\nmetadata:\n" + _bomb()
                                     + "allowed-tools: *a8\n---\nbody\n")
    assert (folder / "SKILL.md").stat().st_size < 1024
    return lib


# ---------------------------------------------------------------- item 7: YAML alias bombs
def test_alias_bomb_is_refused_in_validate(tmp_path):
    lib = _bomb_library(tmp_path)
    start = time.perf_counter()
    problems = validate_library(lib)
    assert time.perf_counter() - start < 5
    assert [str(p) for p in problems] == [
        f"{lib / 'bomb' / 'SKILL.md'}:5: YAML anchors and aliases (&name, *name) are not allowed in front matter"]
    loaded = load_library(lib)
    assert loaded.ids == ("good",)
    assert loaded.get("good").allowed_tools == "Bash(git:*) Read"


def test_alias_bomb_commands_finish_in_seconds(tmp_path):
    """validate, rank and prune (subprocesses, so a bomb would show in time and memory) end quickly."""
    lib = _bomb_library(tmp_path)
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(r) + "\n" for i in range(12)
                            for r in pair(f"t{i}", i % 2 == 0, True, retrieved=["good", "bomb"])))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    warning = (f"warning: {lib / 'bomb' / 'SKILL.md'}:5: YAML anchors and aliases (&name, *name) are not allowed "
               "in front matter")
    for args in (["validate", "--skills", str(lib)], ["rank", str(runs), "--skills", str(lib), "--bootstrap", "0"],
                 ["prune", str(runs), "--skills", str(lib), "--embedder", "none", "--bootstrap", "0"]):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "skillaudit.cli", *args], capture_output=True, text=True,
                              env=env, timeout=60)
        assert time.perf_counter() - start < 30
        assert "Traceback" not in proc.stderr
        if args[0] == "validate":
            assert proc.returncode == 1
            assert proc.stdout.splitlines()[0] == warning[len("warning: "):]
        else:
            assert proc.returncode == 0, proc.stderr
            assert proc.stderr.splitlines() == [warning]


def test_anchors_alone_are_refused_too(tmp_path):
    make_skill(tmp_path, "a", extra="metadata: &m {k: v}\n")
    (p,) = validate_library(tmp_path)
    assert p.message == "YAML anchors and aliases (&name, *name) are not allowed in front matter"


@pytest.mark.parametrize("value", ["[Bash, Read]", "{a: 1}", "7"])
def test_allowed_tools_must_be_a_string(tmp_path, value):
    make_skill(tmp_path, "a", extra=f"allowed-tools: {value}\n")
    assert [p.message for p in validate_library(tmp_path)] == [
        "allowed-tools must be a string (space-separated tool names)"]
    assert load_library(tmp_path).get("a").allowed_tools is None


def test_asterisks_and_ampersands_in_plain_text_are_fine(tmp_path):
    make_skill(tmp_path, "a", description="'Use *this* & that: a * b'", extra="allowed-tools: Bash(ls *)\n")
    assert validate_library(tmp_path) == []
    assert load_library(tmp_path).get("a").description == "Use *this* & that: a * b"


def test_deeply_nested_front_matter_is_one_problem(tmp_path):
    make_skill(tmp_path, "a", extra="metadata: {x: " + "[" * 5000 + "]" * 5000 + "}\n")
    (p,) = validate_library(tmp_path)
    assert p.where.endswith("SKILL.md:2") or "invalid YAML" in p.message


# ---------------------------------------------------------------- item 8: prune --apply
@pytest.fixture
def sim_dir(tmp_path):
    out = tmp_path / "sim"
    sim = simulate(n_tasks=900, n_skills=12, n_harmful=1, n_helpful=1, epochs=2, seed=4)
    sim.write(out)
    return out, sim


def _prune(out: Path, dest: Path, *extra: str):
    return CliRunner().invoke(cli, ["prune", str(out / "runs.jsonl"), "--skills", str(out / "skills"),
                                    "--embedder", "none", "--bootstrap", "300", "--apply", str(dest), *extra])


def _walk(root: Path) -> dict[str, str]:
    """Every entry below root, not following links: relative path -> kind."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            kind = "link" if p.is_symlink() else "dir" if p.is_dir() else "file"
            out[str(p.relative_to(root))] = kind
    return out


def test_apply_copies_links_as_links_never_what_they_point_to(sim_dir, tmp_path):
    out, _sim = sim_dir
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOKEN=hunter2\n")
    (out / "skills" / "shared").symlink_to(outside, target_is_directory=True)
    (out / "skills" / "notes.md").symlink_to("../../outside/secret.txt")
    dest = tmp_path / "pruned"
    res = _prune(out, dest)
    assert res.exit_code == 0, res.output
    tree = _walk(dest)
    assert tree["shared"] == "link" and tree["notes.md"] == "link"
    assert not any(k.startswith("shared/") for k in tree)
    assert os.readlink(dest / "shared") == str(outside)
    assert os.readlink(dest / "notes.md") == str(outside / "secret.txt")  # made absolute: it left the library
    for p, kind in tree.items():
        if kind == "file":
            assert "hunter2" not in (dest / p).read_text(errors="replace")


def test_apply_drops_a_pruned_skill_whose_skill_md_is_a_link(sim_dir, tmp_path):
    out, sim = sim_dir
    (harm,) = sim.ids("harmful")
    md = out / "skills" / harm / "SKILL.md"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(md, elsewhere / "SKILL.md")
    md.symlink_to(elsewhere / "SKILL.md")
    dest = tmp_path / "pruned"
    res = _prune(out, dest, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["applied"]["left_out"] == [harm]
    assert not (dest / harm).exists() and not (dest / harm).is_symlink()
    assert f"`{harm}`" in (dest / "PRUNED.md").read_text()


def test_apply_skips_a_fifo_and_says_so(sim_dir, tmp_path):
    out, sim = sim_dir
    keep = sorted(set(sim.ids("none")))[0]
    os.mkfifo(out / "skills" / keep / "pipe")
    dest = tmp_path / "pruned"
    res = _prune(out, dest)
    assert res.exit_code == 0, res.output
    assert not (dest / keep / "pipe").exists()
    assert (dest / keep / "SKILL.md").is_file()
    assert f"- `{keep}/pipe`" in (dest / "PRUNED.md").read_text()


def test_apply_unreadable_file_is_one_line(sim_dir, tmp_path, monkeypatch):
    out, sim = sim_dir
    keep = sorted(set(sim.ids("none")))[0]
    bad = out / "skills" / keep / "private.txt"
    bad.write_text("x")
    real = shutil.copy2

    def copy2(src, dst, **kw):
        if Path(src) == bad.absolute():
            raise PermissionError(13, "Permission denied", str(src))
        return real(src, dst, **kw)

    monkeypatch.setattr(shutil, "copy2", copy2)
    dest = tmp_path / "pruned"
    res = _prune(out, dest)
    assert res.exit_code == 2
    assert res.output.splitlines()[-1] == f"Error: --apply: cannot copy {bad.absolute()}: Permission denied"
    assert not dest.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".pruned")]


def test_audit_with_an_unreadable_skill_file_is_not_a_traceback(tmp_path, monkeypatch):
    sim = simulate(n_tasks=200, n_skills=6, n_harmful=1, n_helpful=1, seed=3)
    runs, lib = sim.write(tmp_path / "sim")
    secret = Path(lib) / sorted(sim.ids("none"))[0] / "SKILL.md"
    real_open, real_io_open = os.open, io.open

    def deny(path):
        if Path(path).absolute() == secret.absolute():
            raise PermissionError(13, "Permission denied", str(path))

    def os_open(path, *a, **kw):
        deny(path)
        return real_open(path, *a, **kw)

    def io_open(file, *a, **kw):
        if isinstance(file, (str, os.PathLike)):
            deny(file)
        return real_io_open(file, *a, **kw)

    monkeypatch.setattr(library_mod.os, "open", os_open)
    monkeypatch.setattr(io, "open", io_open)
    res = CliRunner().invoke(cli, ["audit", str(runs), "--skills", str(lib), "--out", str(tmp_path / "rep"),
                                   "--embedder", "tfidf", "--bootstrap", "100", "--quiet"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 0, res.output
    assert f"warning: {secret}: cannot read: Permission denied" in res.stderr
    doc = json.loads((tmp_path / "rep" / "audit.json").read_text())
    assert any("hashed as unreadable" in w for w in doc["inputs"]["library"]["warnings"])
