"""`skillaudit clusters` and `skillaudit graph` on a small library and hand-made run logs."""

from __future__ import annotations

import json
import sys

import networkx as nx
import pytest
from _cluster_data import COUNTING, ROUNDING, UNRELATED
from _factories import make_skill, pair
from click.testing import CliRunner

from skillaudit.cli import cli

TOP_KEYS = {"schema", "embedder", "clusters", "near_duplicates", "communities", "interference"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A skills folder of the test library and a run log in which the rounding family hurts."""
    root = tmp_path_factory.mktemp("cli_clusters")
    skills = root / "skills"
    for fam in (ROUNDING, COUNTING, UNRELATED):
        for sid, (desc, body) in fam.items():
            make_skill(skills, sid, description=json.dumps(desc), body=body + "\n")
    recs, n = [], 0
    plan = {**{s: [(False, True)] * 5 + [(True, False)] + [(True, True)] * 4 for s in ROUNDING},
            **{s: [(True, False)] * 2 + [(False, True)] * 2 + [(True, True)] * 6 for s in UNRELATED}}
    for sid, outcomes in plan.items():
        for yp, yn in outcomes:
            recs += pair(f"t{n}", yp, yn, retrieved=[sid])
            n += 1
    runs = root / "runs.jsonl"
    runs.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return {"root": root, "skills": str(skills), "runs": str(runs), "cache": str(root / "cache")}


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_clusters_json_document(workspace):
    """--json prints skillaudit.clusters/v1 with the contract fields; the rounding family is harmful."""
    r = invoke("clusters", workspace["runs"], "--skills", workspace["skills"], "--cache-dir",
               workspace["cache"], "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert set(doc) >= TOP_KEYS and doc["schema"] == "skillaudit.clusters/v1"
    assert doc["embedder"] == "minilm"
    for c in doc["clusters"]:
        assert {"id", "skills", "label", "net", "share", "harmful"} <= set(c)
    harmful = [c for c in doc["clusters"] if c["harmful"]]
    assert [sorted(c["skills"]) for c in harmful] == [sorted(ROUNDING)]
    assert harmful[0]["net"] == -12 and harmful[0]["share"] == pytest.approx(-12.0)
    pairs = {tuple(p[:2]) for p in doc["near_duplicates"]}
    assert ("counter-tally", "frequency-map") in pairs
    assert all(isinstance(p[2], float) and len(p) == 3 for p in doc["near_duplicates"])
    assert doc["interference"] == [] and isinstance(doc["communities"], list)


def test_second_run_reads_every_vector_from_the_cache(workspace):
    """Run twice on one cache dir: the second run encodes no skill."""
    args = ("clusters", workspace["runs"], "--skills", workspace["skills"], "--cache-dir",
            workspace["cache"] + "-2", "--json")
    first = json.loads(invoke(*args).stdout)
    second = json.loads(invoke(*args).stdout)
    assert first["cache"] == {"encoded": 10, "cached": 0}
    assert second["cache"] == {"encoded": 0, "cached": 10}
    assert first["clusters"] == second["clusters"]


def test_clusters_listing_is_readable(workspace):
    """Without --json the command lists harmful clusters, near-duplicates, communities, interference."""
    r = invoke("clusters", workspace["runs"], "--skills", workspace["skills"], "--cache-dir",
               workspace["cache"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "HARMFUL" in out and "round-each-step" in out
    assert "near-duplicates (similarity >= 0.80)" in out
    assert "counter-tally ~ frequency-map" in out
    assert "interference" in out and "(none)" in out


def test_tfidf_embedder_and_threshold_options(workspace):
    """--embedder tfidf works without the model; --threshold changes which pairs are listed."""
    r = invoke("clusters", workspace["runs"], "--skills", workspace["skills"], "--embedder", "tfidf",
               "--threshold", "0.99", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["embedder"] == "tfidf" and doc["near_duplicates"] == []
    assert doc["near_duplicate_threshold"] == 0.99


def test_missing_model_falls_back_to_tfidf_with_a_warning(workspace, monkeypatch, tmp_path):
    """When the MiniLM model cannot be loaded the command warns on stderr and uses tfidf."""
    import skillaudit.library.embed as embed_mod

    monkeypatch.setattr(embed_mod, "_LOADED", {})
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    r = invoke("clusters", workspace["runs"], "--skills", workspace["skills"], "--cache-dir",
               str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    assert "warning: the MiniLM model could not be loaded" in r.stderr
    assert json.loads(r.stdout)["embedder"] == "tfidf"


def test_bad_model_path_is_a_one_line_error(workspace, tmp_path):
    """A missing --embed-model folder exits 2 with a message naming it, no traceback."""
    r = invoke("clusters", workspace["runs"], "--skills", workspace["skills"], "--embed-model",
               str(tmp_path / "missing"))
    assert r.exit_code == 2
    assert f"{tmp_path / 'missing'}: no such model folder (--embed-model)" in r.stderr
    assert "Traceback" not in r.output


def test_skills_are_required(workspace):
    """clusters without --skills is a usage error."""
    r = invoke("clusters", workspace["runs"])
    assert r.exit_code == 2 and "--skills" in r.stderr


@pytest.mark.parametrize("suffix", [".graphml", ".json"])
def test_graph_export(workspace, tmp_path, suffix):
    """`graph --out` writes a file networkx reads back, with near-duplicate and harmful-cluster marks."""
    out = tmp_path / f"g{suffix}"
    r = invoke("graph", workspace["runs"], "--skills", workspace["skills"], "--cache-dir",
               workspace["cache"], "--out", str(out))
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.stdout
    if suffix == ".graphml":
        g = nx.read_graphml(out)
    else:
        g = nx.node_link_graph(json.loads(out.read_text()), edges="edges")
    assert set(g.nodes) == set(ROUNDING) | set(COUNTING) | set(UNRELATED)
    assert g.edges["counter-tally", "frequency-map"]["near_duplicate"] is True
    assert all(g.nodes[s]["cluster_harmful"] for s in ROUNDING)
    assert g.nodes["counter-tally"]["n_retrieved"] == 0


def test_graph_refuses_an_unknown_format(workspace, tmp_path):
    """--out with another suffix exits 2 before any work."""
    r = invoke("graph", workspace["runs"], "--skills", workspace["skills"], "--out",
               str(tmp_path / "g.dot"))
    assert r.exit_code == 2 and "must end in .graphml or .json" in r.stderr
