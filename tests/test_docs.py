"""The docs: cli.md is generated from --help and current; method and formats cover what they promise."""

from __future__ import annotations

import json
import re
from pathlib import Path

from skillaudit.cli import cli, clidoc
from skillaudit.report.clidoc import generate
from skillaudit.runs import read_text_records

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_cli_md_is_current():
    """docs/cli.md equals what `make docs` writes (regenerate it when this fails)."""
    current = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert current == generate(cli), "docs/cli.md is stale: make docs"


def test_cli_md_covers_every_command():
    """cli.md has a section for every command and subcommand, including audit and compare."""
    text = generate(cli)

    for name in cli.commands:
        assert f"## skillaudit {name}\n" in text
    assert "## skillaudit audit\n" in text and "## skillaudit compare\n" in text


def test_clidoc_check_mode(tmp_path):
    """`clidoc --check FILE` exits 0 for a current file and 1 for a stale one."""
    good = tmp_path / "cli.md"
    good.write_text(generate(cli), encoding="utf-8")
    assert clidoc(["--check", str(good)]) == 0
    good.write_text("old", encoding="utf-8")
    assert clidoc(["--check", str(good)]) == 1


def test_method_md_states_every_formula():
    """method.md gives the paired protocol, every metric's formula, the attribution schemes, rules and limits."""
    text = (DOCS / "method.md").read_text(encoding="utf-8")
    for needle in ("(b − c) / n_pairs", "(b_R − c_R) / n_cond", "(b_¬R − c_¬R) / n_skip",
                   "acc+(R) − acc+(¬R)", "acc−(R) − acc−(¬R)",
                   "OAE = (n_cond / n_pairs) · RAE + (n_skip / n_pairs) · Δskip",
                   "agg lift = selection gap + RAE − Δskip", "BinomCDF", "Benjamini–Hochberg",
                   "`equal`", "`rank`", "`score`", "ridge", "`prune`", "`rewrite`", "`merge`",
                   "`needs-data`", "`unused`", "projection", "Noise floor", "S_call"):
        assert needle in text, needle


def test_formats_md_examples_load():
    """Every JSON Lines run-log example in formats.md pairs up with the real loader."""
    text = (DOCS / "formats.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    # run-log blocks: records with a condition; documents with a "schema" (plan/v1, ...) are not run logs
    run_blocks = [b for b in blocks if '"condition"' in b and '"schema"' not in b]
    assert len(run_blocks) >= 2
    for block in run_blocks:
        # records wrapped over several lines for reading are one record each
        records, buf = [], ""
        for line in block.splitlines():
            buf += line.strip()
            try:
                records.append(json.loads(buf))
                buf = ""
            except json.JSONDecodeError:
                continue
        assert records and not buf
        runs = read_text_records("".join(json.dumps(r) + "\n" for r in records))
        assert runs.n_pairs >= 1 and runs.n_unpaired == 0


def test_docs_state_the_thresholds_the_code_uses():
    """method.md, clusters.md and attribution.md quote the near-duplicate and cluster thresholds of clusters.py."""
    from skillaudit.analysis.clusters import CLUSTER_DISTANCE, NEAR_DUPLICATE_THRESHOLD

    method = (DOCS / "method.md").read_text(encoding="utf-8")
    nd, cd = NEAR_DUPLICATE_THRESHOLD, CLUSTER_DISTANCE
    assert f"≥ {nd['minilm']:.2f} (MiniLM) or {nd['tfidf']:.2f} (tfidf)" in method
    assert f"cut at {cd['minilm']:.2f}\n  (MiniLM) or {cd['tfidf']:.2f} (tfidf)" in method
    clusters = (DOCS / "clusters.md").read_text(encoding="utf-8")
    assert f"({nd['minilm']:.2f} for minilm, {nd['tfidf']:.2f} for tfidf)" in clusters
    assert f"{cd['minilm']:.2f} for minilm, {cd['tfidf']:.2f} for tfidf" in clusters
    attribution = (DOCS / "attribution.md").read_text(encoding="utf-8")
    assert f"thresholds {nd['minilm']:.2f} minilm, {nd['tfidf']:.2f} tfidf" in attribution
    for text in (method, clusters, attribution):
        assert "0.50 (tfidf)" not in text and "0.80 (tfidf)" not in text


def test_attribution_md_rules_table_is_generated_from_the_code():
    """docs/attribution.md holds, between its rules markers, exactly the table policy.rules_markdown() renders
    (regenerate: python -m skillaudit.decide.policy --update docs/attribution.md)."""
    from skillaudit.decide.policy import MARK_END, MARK_START, RULES, rules_markdown

    text = (DOCS / "attribution.md").read_text(encoding="utf-8")
    block = text.split(MARK_START, 1)[1].split(MARK_END, 1)[0]
    assert block == "\n" + rules_markdown(), "stale: python -m skillaudit.decide.policy --update docs/attribution.md"
    assert all(f"| {r.id} | `{r.name}` | `{r.action}` |" in block for r in RULES)
