"""`skillaudit prune`: recommendations, JSON contract, and --apply writing a pruned copy only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli
from skillaudit.runs.simulate import simulate


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def sim_dir(tmp_path):
    out = tmp_path / "sim"
    sim = simulate(n_tasks=900, n_skills=12, n_harmful=1, n_helpful=1, epochs=2, seed=4)
    sim.write(out)
    (out / "skills" / "README.md").write_text("library notes\n")
    return out, sim


def _prune(out: Path, *extra: str):
    return CliRunner().invoke(cli, ["prune", str(out / "runs.jsonl"), "--skills", str(out / "skills"),
                                    "--embedder", "none", "--bootstrap", "500", *extra])


def test_prune_json_contract(sim_dir):
    """--json prints skillaudit.prune/v1: one recommendation per skill and the labelled projection."""
    out, sim = sim_dir
    res = _prune(out, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "skillaudit.prune/v1"
    recs = {r["skill_id"]: r for r in doc["recommendations"]}
    assert set(recs) == set(sim.truth)
    assert all(r["action"] in ("prune", "rewrite", "merge", "keep", "needs-data", "unused") for r in recs.values())
    assert recs[sim.ids("harmful")[0]]["action"] == "prune"
    p = doc["projected"]
    assert {"rae_before", "rae_after", "oae_before", "oae_after"} <= set(p) and p["is_projection"] is True
    assert p["rae_after"] > p["rae_before"]


def test_prune_table(sim_dir):
    """The human output: one line per decision under its action (skill, rule id and words, one
    figure), kept entries by name, and the projection labelled as such."""
    out, sim = sim_dir
    res = _prune(out)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    (harm,) = sim.ids("harmful")
    at = lines.index("prune (1)")
    assert lines[at + 1].split()[:2] == [harm, "S104"] and "vs others -" in lines[at + 1], lines
    doc = json.loads(_prune(out, "--json").stdout)
    kept = sorted(r["skill_id"] for r in doc["recommendations"] if r["action"] == "keep")
    keep_line = next(ln for ln in lines if ln.startswith("keep ("))
    assert keep_line.startswith(f"keep ({len(kept)}): ") and all(k in res.stdout for k in kept)
    assert any(ln.startswith("Projection (not a measurement)") for ln in lines)
    assert max(map(len, lines)) <= 100


def test_prune_on_a_45_skill_3_model_library_fits_60_lines_of_100(tmp_path):
    """45 skills, 3 models: at most 60 lines of at most 100 characters, every skill named once per
    decision, each decision line with the id of the rule that decided it (as in --json)."""
    out = tmp_path / "sim45"
    sim = simulate(n_tasks=600, n_skills=45, n_harmful=3, n_helpful=3, n_mixed=2, n_alias_pairs=2, n_unused=2,
                   models=("model-a", "model-b", "model-c"), seed=1)
    sim.write(out)
    args = ["prune", str(out / "runs.jsonl"), "--skills", str(out / "skills"), "--embedder", "tfidf",
            "--bootstrap", "300"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) <= 60 and max(map(len, lines)) <= 100, (len(lines), max(map(len, lines)))
    doc = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    for r in doc["recommendations"]:
        if r["scope"] == "skill" and r["action"] not in ("keep", "unused"):
            assert any(ln.split()[:1] == [r["skill_id"]] and f" {r['rule']} " in ln for ln in lines), r
    assert {r["skill_id"] for r in doc["recommendations"] if r["scope"] == "skill"} <= set(
        res.stdout.replace(",", " ").replace(":", " ").split())


def test_prune_explain_gives_one_skills_evidence_per_model(sim_dir):
    """--explain SKILL: the action, the deciding rule and each model's reason and figures; an unknown
    skill is one line and exit 2."""
    out, sim = sim_dir
    (harm,) = sim.ids("harmful")
    res = _prune(out, "--explain", harm)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[:2] == [harm, "  prune by S104 (harmful vs the other entries) for sim-model"]
    assert lines[2].startswith("  reason: harmful vs the other entries: ")
    figures = " ".join(" ".join(lines[lines.index(next(ln for ln in lines if ln.startswith("  figures"))):]).split())
    assert figures.startswith("figures (sim-model): n_retrieved ") and " relative_effect -0." in figures, figures
    assert max(map(len, lines)) <= 100
    bad = _prune(out, "--explain", "no-such-skill")
    assert bad.exit_code == 2 and bad.output.strip().splitlines()[-1] == (
        "Error: --explain no-such-skill: no recommendation for that skill in these runs")


def test_apply_writes_pruned_copy_and_leaves_original_byte_for_byte(sim_dir, tmp_path):
    """--apply copies the library minus the prune set plus PRUNED.md; the original is byte-for-byte unchanged."""
    out, sim = sim_dir
    lib = out / "skills"
    before = _snapshot(lib)
    mtimes = {p: os.stat(p).st_mtime_ns for p in lib.rglob("*")}
    dest = tmp_path / "pruned"
    res = _prune(out, "--apply", str(dest), "--json")
    assert res.exit_code == 0, res.output
    assert _snapshot(lib) == before
    assert {p: os.stat(p).st_mtime_ns for p in lib.rglob("*")} == mtimes
    (harm,) = sim.ids("harmful")
    assert json.loads(res.stdout)["applied"]["left_out"] == [harm]
    copy = _snapshot(dest)
    assert f"{harm}/SKILL.md" not in copy
    for name, data in before.items():
        if not name.startswith(f"{harm}/"):
            assert copy[name] == data  # every kept file copied byte for byte (README too)
    pruned_md = (dest / "PRUNED.md").read_text()
    assert f"`{harm}`" in pruned_md and "associated with more harm than the average entry" in pruned_md
    assert "projection" in pruned_md


def test_apply_into_empty_existing_folder(sim_dir, tmp_path):
    """An existing empty folder is accepted as the --apply target."""
    out, _ = sim_dir
    (tmp_path / "empty").mkdir()
    res = _prune(out, "--apply", str(tmp_path / "empty"))
    assert res.exit_code == 0, res.output
    assert (tmp_path / "empty" / "PRUNED.md").is_file()
    assert "wrote a pruned copy" in res.stdout


@pytest.mark.parametrize("where", ["library", "inside"])
def test_apply_refuses_the_library_itself(sim_dir, where):
    """--apply into the library (or a folder inside it) exits 2 with an exact message and changes nothing."""
    out, _ = sim_dir
    lib = out / "skills"
    before = _snapshot(lib)
    target = lib if where == "library" else lib / "pruned"
    res = _prune(out, "--apply", str(target))
    assert res.exit_code == 2
    assert res.stderr == (f"Error: --apply {target}: is the skill library itself or inside it; "
                          "choose a folder outside the library\n")
    assert _snapshot(lib) == before and not (lib / "pruned").exists()


def test_apply_refuses_non_empty_folder(sim_dir, tmp_path):
    """--apply into a non-empty folder exits 2 with an exact message and leaves the folder alone."""
    out, _ = sim_dir
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    res = _prune(out, "--apply", str(busy))
    assert res.exit_code == 2
    assert res.stderr == f"Error: --apply {busy}: folder is not empty; choose a new or empty folder\n"
    assert _snapshot(busy) == {"keep.txt": b"mine"}


def test_apply_jsonl_library(tmp_path):
    """A JSON Lines library is copied without the pruned skills' lines, the original file untouched."""
    sim = simulate(n_tasks=900, n_skills=12, n_harmful=1, n_helpful=1, epochs=2, seed=4)
    runs = tmp_path / "runs.jsonl"
    runs.write_text(sim.jsonl())
    lib = tmp_path / "lib.jsonl"
    lib.write_text("".join(json.dumps(s) + "\n" for s in sim.skills))
    original = lib.read_bytes()
    res = CliRunner().invoke(cli, ["prune", str(runs), "--skills", str(lib), "--embedder", "none",
                                   "--bootstrap", "300", "--apply", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert lib.read_bytes() == original
    kept = [json.loads(line)["id"] for line in (tmp_path / "out" / "lib.jsonl").read_text().splitlines()]
    assert kept == [s["id"] for s in sim.skills if s["id"] not in sim.ids("harmful")]


def test_prune_with_tfidf_near_duplicates(sim_dir):
    """With --embedder tfidf the near-duplicate finder runs when the clusters module is available."""
    pytest.importorskip("skillaudit.analysis.clusters")
    out, _ = sim_dir
    res = CliRunner().invoke(cli, ["prune", str(out / "runs.jsonl"), "--skills", str(out / "skills"),
                                   "--embedder", "tfidf", "--bootstrap", "200", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["settings"]["near_duplicates"] is not None


def test_prune_json_has_the_library_section_and_scoped_entries(tmp_path):
    """prune --json gains `library` and scope-tagged entries; the table starts with the library verdict."""
    from skillaudit.runs.simulate import scenario

    runs, lib = scenario("dilution", seed=1).write(tmp_path / "sim")
    args = ["prune", str(runs), "--skills", str(lib), "--embedder", "tfidf", "--bootstrap", "1000"]
    doc = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    (e,) = doc["library"]
    assert e["verdict"] == "library-wide" and e["heterogeneity_p"] > 0.05 and e["mean_effect_ci"][1] < 0
    scopes = {r["scope"] for r in doc["recommendations"]}
    assert scopes == {"library", "skill"}
    assert not [r for r in doc["recommendations"] if r["action"] == "prune"]
    table = CliRunner().invoke(cli, args)
    assert table.exit_code == 0
    rule = next(r["rule"] for r in doc["recommendations"] if r["scope"] == "library")
    action = next(r["action"] for r in doc["recommendations"] if r["scope"] == "library")
    assert table.stdout.startswith(f"library level\n  {action} for sim-model (sim-bench): {rule} library-wide harm")
    assert table.stdout.splitlines()[2].startswith(f"    {e['mean_effect'] * 100:+.1f} pp per injected skill [")


def test_prune_and_audit_use_the_same_near_duplicate_definition():
    """prune and audit default to the same embedder (minilm) and the same calibrated threshold."""
    from skillaudit.cli import audit, prune

    def default(cmd, name):
        return next(p.default for p in cmd.params if p.name == name)

    assert default(prune, "embedder") == default(audit, "embedder") == "minilm"
    assert default(prune, "threshold") is None and default(audit, "threshold") is None


def test_merge_reasons_name_the_near_duplicate_rule_first_on_the_sample_runs():
    """On the bundled sample runs (with mask re-runs), every merge reason opens with the near-duplicate rule that decided it; the re-runs' evidence follows."""
    root = Path(__file__).resolve().parents[1]
    runs = sorted(str(p) for p in (root / "sample_runs").glob("*.jsonl"))
    res = CliRunner().invoke(cli, ["prune", *runs, "--skills", str(root / "skills"), "--json", "--bootstrap", "200"])
    assert res.exit_code == 0, res.output
    merges = [r for r in json.loads(res.stdout)["recommendations"] if r["action"] == "merge"]
    assert len(merges) == 4
    for r in merges:  # one clause per model: "on MODEL: near-duplicate..."
        for clause in r["reason"].split("; on "):
            assert clause.split(": ", 1)[1].startswith("near-duplicate"), r["reason"]
    assert any("; re-runs do not show it worse than the other entries" in r["reason"] for r in merges)


def test_every_rule_has_a_key_figure_for_the_short_view():
    """prune's one-line view gives each rule's key figure: the table covers exactly the rules of the
    policy, and a recommendation without evidence still gets a line (no figure, no error)."""
    from skillaudit.decide.policy import RULES
    from skillaudit.decide.recommend import Recommendation
    from skillaudit.report.prune_view import KEY_FIGURE, key_figure

    assert set(KEY_FIGURE) == {r.id for r in RULES}
    for r in RULES:
        assert isinstance(key_figure(Recommendation("s", r.action, "", {}, rule=r.id)), str)


def test_where_retrieval_follows_failure_prune_asks_for_control_arms(tmp_path):
    """Issue 52 F10: the agent searches because it is failing (no skill does anything): prune
    recommends no gate and no prune but 'verify' (L000) naming run --arms random,empty, and the skill
    fetched mostly by failing runs is needs-data (S100), the projection unchanged; once the runs have
    a random control arm on those pairs, the advice is no longer about selection."""
    import orjson

    from skillaudit.runs.simulate import failure_driven

    lib = simulate(n_tasks=20, n_skills=20, n_harmful=0, n_helpful=0, seed=1).write(tmp_path / "lib")[1]
    recs, _ = failure_driven(0)
    runs = tmp_path / "runs.jsonl"
    runs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    res = CliRunner().invoke(cli, ["prune", str(runs), "--skills", str(lib), "--embedder", "none", "--bootstrap", "300"])
    assert res.exit_code == 0, res.output
    assert "verify for sim-model (sim-bench): L000 retrieval follows failure, verify first" in res.stdout
    assert "prune (" not in res.stdout
    recs, truth = failure_driven(0, culprit=True)
    bad = next(s for s, k in truth.items() if k != "none")
    runs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    res = CliRunner().invoke(cli, ["prune", str(runs), "--skills", str(lib), "--embedder", "none",
                                   "--bootstrap", "300", "--json"])
    doc = json.loads(res.stdout)
    (rec,) = [r for r in doc["recommendations"] if r["skill_id"] == bad]
    assert rec["rule"] == "S100" and "run --arms random,empty" in rec["reason"]
    assert doc["projected"]["rae_after"] == doc["projected"]["rae_before"]
    # a random arm on every retrieving pair: the control arms measure it, no S100
    arms = [{**r, "arm": "random"} for r in recs if r["condition"] == "enabled" and r["retrievals"]]
    (tmp_path / "arms.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in arms))
    res = CliRunner().invoke(cli, ["prune", str(runs), str(tmp_path / "arms.jsonl"), "--skills", str(lib),
                                   "--embedder", "none", "--bootstrap", "300", "--json"])
    assert res.exit_code == 0, res.output
    assert all(r["rule"] not in ("S100", "L000") for r in json.loads(res.stdout)["recommendations"])


def test_a_skill_that_helps_code_and_harms_math_is_gated_per_benchmark(tmp_path):
    """Issue 52 F9: one skill rescues code runs and harms math runs (same model): prune's line is
    B001 with each benchmark's figure, --json has per-benchmark evidence, the reason names both."""
    import orjson

    from skillaudit.runs.simulate import benchmark_split

    lib = simulate(n_tasks=20, n_skills=20, n_harmful=0, n_helpful=0, seed=1).write(tmp_path / "lib")[1]
    recs, truth = benchmark_split(0)
    split = next(s for s, k in truth.items() if k == "split")
    runs = tmp_path / "runs.jsonl"
    runs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    args = ["prune", str(runs), "--skills", str(lib), "--embedder", "none", "--bootstrap", "200"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith(split))
    assert "B001 helps one benchmark, hurts another" in line and "code +17.9" in line and "math -21.1" in line
    rec = next(r for r in json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)["recommendations"]
               if r["skill_id"] == split)
    assert rec["action"] == "rewrite" and set(rec["evidence"]["per_benchmark"]) == {"code", "math"}
    assert "harms math" in rec["reason"] and "helps code" in rec["reason"] and "gate it per benchmark" in rec["reason"]


def test_prune_of_one_model_of_runs_with_control_arms():
    """prune --model on logs holding control arms joins the arms to that model's pairs: the bundled
    runs' SmolLM2 (random, filler and replicate arms) is pruned without an error (an IndexError
    while control arms were joined to all the pairs)."""
    repo = Path(__file__).resolve().parents[1]
    logs = sorted(str(p) for p in (repo / "sample_runs").glob("*.jsonl"))
    res = CliRunner().invoke(cli, ["prune", *logs, "--skills", str(repo / "skills"), "--model",
                                   "smollm2-135m-instruct", "--embedder", "none", "--bootstrap", "200", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["settings"]["models"] == ["smollm2-135m-instruct"]
    assert all(r["rule"] not in ("S100", "L000") for r in doc["recommendations"])


def test_a_long_line_never_cuts_its_key_figure():
    """A decision line too wide for 100 characters gives up the rule's words (its code stays), then
    moves the figure below, whole: never "~476 mo…"."""
    from skillaudit.report.prune_view import _fit

    widths = [20, 24, 36]
    fig = "13 tasks; ~476 more needed"
    cells = ["skill-with-a-long-id", "model-alpha, model-beta", "S503 too few retrieving tasks", fig]
    (line,) = _fit(cells, widths, 100, short_rule="S503")
    assert line.endswith(fig) and " S503 " in line and len(line) <= 100
    long_fig = "vs others -12.3 pp [-20.1, -4.5], q 0.012; ~1,234 mask re-runs; " + "x" * 40
    lines = _fit([*cells[:3], long_fig], widths, 100, short_rule="S503")
    assert len(lines) >= 2 and all(len(ln) <= 100 for ln in lines)
    assert " ".join(" ".join(ln.split()) for ln in lines[1:]) == long_fig
