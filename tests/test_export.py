"""`skillaudit export --parquet`: pairs and pair x skill tables that aggregate to skillaudit's counts."""

from __future__ import annotations

import json

import pytest
from _factories import pair
from click.testing import CliRunner

from skillaudit.cli import cli

pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture
def log(write_jsonl):
    recs = []
    for i in range(40):
        skills = [f"s{i % 5}", f"s{(i * 3) % 7}"][: 1 + i % 2] if i % 3 else None
        recs += pair(f"t{i}", i % 4 != 0, i % 3 == 0, retrieved=skills, model=f"m{i % 2}")
    return str(write_jsonl(recs))


def test_parquet_round_trip_counts_equal_rank(log, tmp_path):
    """Grouping the exported long table by skill gives rank's n_retrieved, b, c, net and equal share."""
    out = tmp_path / "export"
    runner = CliRunner()
    res = runner.invoke(cli, ["export", log, "--parquet", str(out)])
    assert res.exit_code == 0, res.output
    pairs = pq.read_table(out / "pairs.parquet").to_pandas()
    long = pq.read_table(out / "pair_skills.parquet").to_pandas()
    assert len(pairs) == 40 and set(long["rank"]) == {1, 2}
    joined = long.merge(pairs, on="pair_id")
    joined["b"] = joined.y_pos & ~joined.y_neg
    joined["c"] = ~joined.y_pos & joined.y_neg
    joined["share"] = joined.flip / joined.n_skills
    got = joined.groupby(joined.skill_id.astype(str)).agg(n=("b", "size"), b=("b", "sum"), c=("c", "sum"),
                                                          share=("share", "sum"))
    rank = json.loads(runner.invoke(cli, ["rank", log, "--json", "--bootstrap", "0", "--pool-models"]).stdout)
    want = {s["skill_id"]: (s["n_retrieved"], s["b"], s["c"], round(s["share"], 9))
            for s in rank["skills"] if s["n_retrieved"]}
    assert {k: (int(r.n), int(r.b), int(r.c), round(float(r.share), 9)) for k, r in got.iterrows()} == want


def test_export_refuses_a_folder_with_other_files(log, tmp_path):
    """A non-empty folder that is not an earlier export is left alone (exit 2, one-line message)."""
    (tmp_path / "keep.txt").write_text("mine")
    res = CliRunner().invoke(cli, ["export", log, "--parquet", str(tmp_path)])
    assert res.exit_code == 2 and "folder is not empty (has " in res.output
    assert (tmp_path / "keep.txt").read_text() == "mine"


def _scaling_sql() -> str:
    """The DuckDB query of docs/scaling.md, as printed there."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "scaling.md").read_text()
    start = text.index("```sql\n") + len("```sql\n")
    return text[start:text.index("```", start)]


def test_scaling_doc_duckdb_query_equals_rank(log, tmp_path):
    """The SQL of docs/scaling.md run by DuckDB over the export gives rank --json's counts, in rank's order."""
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "export"
    runner = CliRunner()
    res = runner.invoke(cli, ["export", log, "--parquet", str(out)])
    assert res.exit_code == 0, res.output
    sql = _scaling_sql()
    assert sql.count("'export/") == 2
    rows = duckdb.connect().execute(sql.replace("'export/", f"'{out}/")).fetchall()
    rank = json.loads(runner.invoke(cli, ["rank", log, "--json", "--bootstrap", "0", "--pool-models"]).stdout)
    want = [(s["skill_id"], s["n_retrieved"], s["b"], s["c"], s["net"], round(s["share"], 9), s["exclusive_n"])
            for s in rank["skills"] if s["n_retrieved"]]
    got = [(str(sid), int(n), int(b), int(c), int(net), round(float(share), 9), int(ex))
           for sid, n, b, c, net, share, ex in rows]
    assert len(got) == 7 and got == want
