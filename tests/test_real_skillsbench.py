"""The defects the published SkillsBench registry exposed, each checked on the real file (skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.cli import cli

REGISTRY = Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "skillsbench-results-registry.json"
pytestmark = pytest.mark.skipif(not REGISTRY.is_file(), reason="../shared/data/real is absent")


def _run(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sb") / "sb.jsonl"
    res = _run(["import", "skillsbench", str(REGISTRY), "-o", str(path), "--json"])
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    # the summary and --json say what was paired and how the benchmark was named
    assert doc["paired_on"].startswith("(model, benchmark, task_id) with k-of-n counts")
    assert doc["benchmark_naming"] and doc["pairs"] == 4698
    return path


def test_metrics_prints_one_row_per_model_with_one_benchmark(log):
    """With one benchmark the pooled '*' row is not printed again: 18 models, 18 rows; the OAE test is task-level."""
    res = _run(["metrics", str(log), "--bootstrap", "100"])
    assert res.exit_code == 0
    rows = [ln for ln in res.output.splitlines() if "skillsbench" in ln]
    assert len(rows) == 18 and not any("│ *  " in ln for ln in res.output.splitlines())
    assert "use not logged: the runs say which skills were offered" in res.output
    doc = json.loads(_run(["metrics", str(log), "--bootstrap", "100", "--json"]).stdout)
    tests = {g["oae_p_test"] for g in doc["groups"]}
    assert tests == {"exact sign-flip test of each task's summed flips"}
    assert all(g["delta_skip"] is None and g["n_use_unlogged"] == g["n_pairs"] for g in doc["groups"])


def test_rank_does_not_claim_one_pair_per_task(log):
    """rank says skill use is not logged instead of ranking nothing; its test label does not say 'one pair per task'."""
    res = _run(["rank", str(log), "--bootstrap", "0"])
    assert res.exit_code == 0 and res.output.startswith("skill use not logged:")
    doc = json.loads(_run(["rank", str(log), "--bootstrap", "0", "--json"]).stdout)
    assert doc["use_logged"] is False
    assert "one pair per task" not in json.dumps(doc)


def test_decomposition_draws_every_model(log, monkeypatch):
    """The decomposition figure has a row for each of the 18 models (none silently dropped)."""
    from skillaudit.analysis.metrics import compute_metrics
    from skillaudit.report import figures
    from skillaudit.runs import load_runs

    doc = compute_metrics(load_runs([str(log)]), n_boot=0).to_dict()
    seen = {}

    def grab(fig):
        seen["labels"] = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        return b"png"

    monkeypatch.setattr(figures, "_png", grab)
    assert figures.decomposition(doc) == b"png"
    assert len(seen["labels"]) == 18 and all("use not logged" in t for t in seen["labels"])


def test_compare_takes_o_and_says_why_figure_1_cannot_be_drawn(log, tmp_path):
    """compare accepts -o; with skill use not logged it explains why Figure 1 has nothing to draw (exit 1, no file)."""
    out = tmp_path / "fig.png"
    res = _run(["compare", str(log), "-o", str(out), "--bootstrap", "100", "-q"])
    assert res.exit_code == 1 and "skill use not logged: Figure 1" in res.output and not out.exists()
