"""`skillaudit triggers`: description overlap (no model call) and the trigger query file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillaudit.analysis.triggers import description_overlap
from skillaudit.cli import cli
from skillaudit.errors import InputError
from skillaudit.library import Library, Skill
from skillaudit.tasks.queries import load_queries

# three planted pairs of paraphrased descriptions (few shared words for two of them) among unrelated skills
PLANTED = {
    "pdf-text-extraction": "Extract the text and tables from PDF documents with pdfplumber; handles multi-column "
                           "pages and scanned files via OCR.",
    "read-pdf-content": "Pull readable content out of a .pdf file: page text, tabular data and figures, including "
                        "scanned pages that need OCR.",
    "git-commit-messages": "Write clear git commit messages: a short imperative summary line, a blank line, then the "
                           "why of the change.",
    "conventional-commits": "Format commit messages in the Conventional Commits style (feat:, fix:, chore:) with an "
                            "imperative subject and a body explaining the reason.",
    "docker-compose-services": "Define multi-container apps with docker compose: services, volumes, networks, health "
                               "checks and environment files.",
    "compose-multi-container": "Set up several containers that work together using a compose.yaml file: service "
                               "definitions, shared volumes, networks and healthchecks.",
}
OTHERS = {
    "sql-query-tuning": "Speed up slow SQL queries: read EXPLAIN plans, add the right indexes, avoid SELECT * and N+1 "
                        "patterns.",
    "regex-validation": "Validate emails, phone numbers and dates with regular expressions and explain each part of "
                        "the pattern.",
    "react-state-hooks": "Manage component state in React with useState and useReducer, and side effects with "
                         "useEffect.",
    "kubernetes-rollouts": "Roll out and roll back Kubernetes deployments, watch rollout status and configure "
                           "readiness probes.",
    "pandas-groupby": "Summarise tabular data with pandas groupby, aggregation functions, pivot tables and merges.",
    "unit-test-pytest": "Write unit tests with pytest: fixtures, parametrize, monkeypatch and assertions on exceptions.",
    "http-retry-backoff": "Call flaky HTTP APIs robustly: timeouts, retries with exponential backoff and jitter, "
                          "idempotency keys.",
    "latex-math-typesetting": "Typeset equations in LaTeX: fractions, aligned environments, matrices and theorem "
                              "blocks.",
    "bash-script-safety": "Write safer bash scripts: set -euo pipefail, quoting variables, traps for cleanup, "
                          "shellcheck.",
    "image-resize-pillow": "Resize, crop and convert images with Pillow while keeping aspect ratio and EXIF "
                           "orientation.",
    "json-schema-validate": "Validate JSON documents against a JSON Schema and report each violation with its path.",
    "time-zone-handling": "Convert timestamps between time zones with zoneinfo, parse ISO 8601 and avoid naive "
                          "datetimes.",
    "excel-formulas": "Build spreadsheet formulas in Excel: VLOOKUP and XLOOKUP, SUMIFS, conditional formatting.",
    "accessibility-audit": "Check a web page for accessibility: alt text, contrast ratios, keyboard navigation and "
                           "ARIA roles.",
}
WANT = {("pdf-text-extraction", "read-pdf-content"), ("conventional-commits", "git-commit-messages"),
        ("compose-multi-container", "docker-compose-services")}


def _library(descriptions: dict[str, str]) -> Library:
    return Library(skills=tuple(Skill(id=k, name=k, description=v, body=f"# {k}\n\nSteps.") for k, v in descriptions.items()))


def _write_library(root, descriptions: dict[str, str]):
    for k, v in descriptions.items():
        (root / k).mkdir(parents=True)
        (root / k / "SKILL.md").write_text(f"---\nname: {k}\ndescription: {json.dumps(v)}\n---\n# {k}\n\nSteps.\n")
    return root


def test_description_overlap_finds_the_planted_rivals_and_nothing_else():
    """MiniLM and BM25 together: exactly the three planted paraphrase pairs among 20 skills."""
    report = description_overlap(_library({**PLANTED, **OTHERS}))
    assert report.embedder == "minilm"
    assert {(p.a, p.b) for p in report.pairs} == WANT
    pdf = next(p for p in report.pairs if p.a == "pdf-text-extraction")
    assert "embedding" in pdf.signals and 0.65 <= pdf.cosine <= 1
    assert report.rivals_of["read-pdf-content"] == ["pdf-text-extraction"]


def test_description_overlap_without_a_model_finds_the_lexical_rivals():
    """tfidf: no model; the pairs it flags are planted ones (the paraphrases with few shared words may pass)."""
    report = description_overlap(_library({**PLANTED, **OTHERS}), "tfidf")
    got = {(p.a, p.b) for p in report.pairs}
    assert got and got <= WANT
    assert report.method.startswith("likely rivals: BM25") and "tfidf cosine" in report.method


def test_triggers_cli_lists_rivals_in_text_and_json(tmp_path):
    lib = _write_library(tmp_path / "skills", {**PLANTED, **OTHERS})
    res = CliRunner().invoke(cli, ["triggers", "--skills", str(lib)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "likely rivals among 20 skills: 3 pair(s) whose descriptions compete (no model call)"
    assert all(len(line) <= 100 for line in lines)
    res = CliRunner().invoke(cli, ["triggers", "--skills", str(lib), "--json"])
    doc = json.loads(res.output)
    assert doc["schema"] == "skillaudit.triggers/v1"
    assert {(p["a"], p["b"]) for p in doc["overlap"]["pairs"]} == WANT
    assert len(doc["library"]) == 20 and all(len(s["hash"]) == 64 for s in doc["library"])


def test_triggers_cli_bad_library_is_one_line_exit_2(tmp_path):
    res = CliRunner().invoke(cli, ["triggers", "--skills", str(tmp_path / "missing")])
    assert res.exit_code == 2
    assert res.output.startswith("Error: ") and len(res.output.strip().splitlines()) == 1


# ---------------------------------------------------------------- the query file
def test_query_file_reads_ids_labels_and_yaml(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text('{"query": "count words", "should": ["a"], "should_not": ["b"]}\n'
                 '# a comment\n'
                 '{"query": "nothing fits", "should": [], "id": "neg-1"}\n')
    qs = load_queries(f, ["a", "b"])
    assert [(q.id, q.should, q.should_not, q.line) for q in qs] == [("q1", ("a",), ("b",), 1),
                                                                      ("neg-1", (), (), 3)]
    y = tmp_path / "q.yaml"
    y.write_text("- query: count words\n  should: [a]\n- query: other\n  should_not: [b]\n")
    assert [q.id for q in load_queries(y, ["a", "b"])] == ["q1", "q3"]


@pytest.mark.parametrize(("line", "message"), [
    ('{"query": "x", "should": ["a"], "should_not": ["a"]}', "q.jsonl:1: 'a' is in both `should` and `should_not`"),
    ('{"query": "x", "shuold": ["a"]}', "q.jsonl:1: unknown key 'shuold'"),
    ('{"query": "x", "should": ["alpha-skil"]}', "q.jsonl:1: no skill named 'alpha-skil' in the library "
                                                 "(did you mean 'alpha-skill'?)"),
    ('{"query": "", "should": ["a"]}', "q.jsonl:1: `query` must be a non-empty string"),
    ('{"query": "x", "should": "a"}', "q.jsonl:1: `should` must be a list of skill names"),
    ('{"query": "x"', "q.jsonl:1: not valid JSON"),
    ('["x"]', "q.jsonl:1: expected an object with `query` and `should`"),
])
def test_query_file_errors_name_the_file_and_line(tmp_path, line, message):
    f = tmp_path / "q.jsonl"
    f.write_text(line + "\n")
    with pytest.raises(InputError) as exc:
        load_queries(f, ["a", "b", "alpha-skill"])
    assert str(exc.value).startswith(str(tmp_path / message.split(":")[0]) + message[len(message.split(":")[0]):])


def test_query_ids_are_unique(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text('{"query": "x", "id": "same"}\n{"query": "y", "id": "same"}\n')
    with pytest.raises(InputError, match=r"q.jsonl:2: query id 'same' already used on line 1"):
        load_queries(f)


# ---------------------------------------------------------------- running the queries
DEMO = str(Path(__file__).resolve().parents[1] / "skillaudit" / "demo" / "skills")
QUERIES = [
    {"id": "count-1", "query": "How many times does each word appear in this sentence?",
     "should": ["counter-frequency-counting"], "should_not": ["sort-with-key-function"]},
    {"id": "count-2", "query": "Count how often each element occurs and find the most common one with Counter.",
     "should": ["counter-frequency-counting"]},
    {"id": "count-3", "query": "How many times is each character repeated in a string?",
     "should": ["counter-frequency-counting"]},
    {"id": "pct-1", "query": "What is the percentage increase from an old price of 40 to a new price of 50?",
     "should": ["percent-change"]},
    {"id": "bisect-1", "query": "Find the insertion point in a sorted list with the bisect module.",
     "should": ["binary-search-bisect"]},
    {"id": "neg-1", "query": "Write a haiku about autumn leaves.", "should": [],
     "should_not": ["tally-element-occurrences"]},
]


def _queries(tmp_path) -> Path:
    f = tmp_path / "queries.jsonl"
    f.write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    return f


def test_triggers_runs_queries_and_finds_the_poacher(tmp_path, monkeypatch):
    """A scripted agent whose tally skill takes the "how many times" queries: recall of the counter
    skill 1/3, its rival tally (marked as an overlapping description), tally's precision 0/2."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    out = tmp_path / "triggers.jsonl"
    args = ["triggers", "--skills", DEMO, "--queries", str(_queries(tmp_path)), "--out", str(out),
            "--agent", "trigger_agents:best_match", "--epochs", "2", "--embedder", "tfidf"]
    res = CliRunner().invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    by = {s["skill_id"]: s for s in doc["skills"]}
    counter = by["counter-frequency-counting"]
    assert (counter["n_hit"], counter["n_should"]) == (1, 3) and counter["recall"] == pytest.approx(1 / 3)
    assert counter["rivals"] == [{"skill_id": "tally-element-occurrences", "queries": 2}]
    tally = by["tally-element-occurrences"]
    assert (tally["n_fired"], tally["n_false"], tally["precision"]) == (2, 2, 0.0)
    assert by["percent-change"]["recall"] == 1.0 and by["binary-search-bisect"]["recall"] == 1.0
    assert doc["n_runs"] == 12 and doc["n_errors"] == 0 and len(out.read_text().splitlines()) == 12
    lo, hi = counter["recall_ci"]
    assert 0 < lo < 1 / 3 < hi < 1
    # the text view marks the rival whose description overlaps; a second run resumes (nothing new)
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "tally-element-occurrences (2) *" in res.output
    assert "triggers: 0 episode(s) to run (6 queries x 2 epoch(s), 12 already logged)" in res.output
    assert len(out.read_text().splitlines()) == 12


def test_a_querys_runs_vote_once(tmp_path, monkeypatch):
    """Five runs of one query on a fair coin: the query counts once, fired when >= half its runs did."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "p", "query": "percent growth", "should": ["percent-change"]}) + "\n")
    out = tmp_path / "t.jsonl"
    res = CliRunner().invoke(cli, ["triggers", "--skills", DEMO, "--queries", str(q), "--out", str(out), "--agent",
                                   "trigger_agents:coin", "--epochs", "5", "--embedder", "tfidf", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    rate = doc["queries"][0]["fired"].get("percent-change", 0.0)
    fired = sum(1 for line in out.read_text().splitlines() if json.loads(line)["meta"]["fired"])
    assert rate == pytest.approx(fired / 5)
    s = doc["skills"][0]
    assert (s["n_should"], s["n_hit"]) == (1, int(rate >= 0.5))


def test_dry_run_and_budget_say_what_runs_before_any_model_call(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    out = tmp_path / "t.jsonl"
    base = ["triggers", "--skills", DEMO, "--queries", str(_queries(tmp_path)), "--out", str(out),
            "--agent", "trigger_agents:best_match", "--epochs", "2", "--embedder", "tfidf"]
    res = CliRunner().invoke(cli, [*base, "--dry-run"])
    assert res.exit_code == 0 and not out.exists()
    assert res.output.startswith("triggers: 12 episode(s) to run (6 queries x 2 epoch(s), 0 already logged), about ")
    # each episode logs 1,050 tokens: a budget of 3,000 stops after 3 (one at a time), and a re-run resumes
    res = CliRunner().invoke(cli, [*base, "--budget-tokens", "3000"])
    assert res.exit_code == 0, res.output
    assert "--budget-tokens 3,000 reached" in res.output and len(out.read_text().splitlines()) == 3
    res = CliRunner().invoke(cli, base)
    assert res.exit_code == 0 and len(out.read_text().splitlines()) == 12


def test_a_failing_agent_is_an_error_never_a_miss(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    out = tmp_path / "t.jsonl"
    res = CliRunner().invoke(cli, ["triggers", "--skills", DEMO, "--queries", str(_queries(tmp_path)), "--out",
                                   str(out), "--agent", "trigger_agents:broken", "--epochs", "1", "--embedder", "tfidf"])
    assert res.exit_code == 2
    assert "every one of the 6 trigger run(s) of this session is an error" in res.output
    assert all(json.loads(line)["error"].startswith("agent: ") for line in out.read_text().splitlines())


def test_unknown_skill_in_the_queries_fails_before_any_run(tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"query": "x", "should": ["percent-chang"]}) + "\n")
    res = CliRunner().invoke(cli, ["triggers", "--skills", DEMO, "--queries", str(q), "--out", str(tmp_path / "o"),
                                   "--agent", "trigger_agents:coin"])
    assert res.exit_code == 2
    assert res.output == f"Error: {q}:1: no skill named 'percent-chang' in the library (did you mean 'percent-change'?)\n"


def test_the_built_in_catalog_agent_on_an_endpoint(tmp_path):
    """The built-in catalog loop against a scripted endpoint: the catalog lists every skill, the model
    loads one by name, and what it loaded is what fired."""
    from _harness_fakes import ScriptedServer, chat_reply

    def responder(path, body):
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        assert "<available_skills>" in system and "- tally-element-occurrences:" in system
        if "returned:" in user:
            return chat_reply("final answer")
        pick = "percent-change" if "percent" in user else "tally-element-occurrences"
        return chat_reply(f'<tool_call>\n{{"name": "load_skill", "arguments": {{"name": "{pick}"}}}}\n</tool_call>')

    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "p", "query": "percent increase from 4 to 5", "should": ["percent-change"]}) + "\n"
                 + json.dumps({"id": "c", "query": "count words", "should": ["counter-frequency-counting"]}) + "\n")
    out = tmp_path / "t.jsonl"
    with ScriptedServer(responder) as srv:
        res = CliRunner().invoke(cli, ["triggers", "--skills", DEMO, "--queries", str(q), "--out", str(out),
                                       "--endpoint", srv.url, "--model", "fake", "--epochs", "1", "--embedder",
                                       "tfidf", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    by = {s["skill_id"]: s for s in doc["skills"]}
    assert by["percent-change"]["recall"] == 1.0
    assert by["counter-frequency-counting"]["rivals"] == [{"skill_id": "tally-element-occurrences", "queries": 1}]
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["meta"]["fired"][0] for r in recs} == {"percent-change", "tally-element-occurrences"}
    assert all(r["meta"]["skills_mode"] == "catalog" and len(r["meta"]["listed"]) == 30 for r in recs)


def test_search_mode_fires_what_the_search_showed(tmp_path):
    """--skills-mode search: the model's search_skills call returns the BM25 top-k; those skills fired."""
    from _harness_fakes import ScriptedServer, chat_reply

    def responder(path, body):
        if len(body["messages"]) > 2:
            return chat_reply("final answer")
        return chat_reply('<tool_call>\n{"name": "search_skills", "arguments": {"query": "binary search bisect '
                          'insertion point"}}\n</tool_call>')

    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "b", "query": "insertion point in a sorted list", "should": ["binary-search-bisect"]})
                 + "\n")
    out = tmp_path / "t.jsonl"
    with ScriptedServer(responder) as srv:
        res = CliRunner().invoke(cli, ["triggers", "--skills", DEMO, "--queries", str(q), "--out", str(out),
                                       "--endpoint", srv.url, "--model", "fake", "--epochs", "1", "--skills-mode",
                                       "search", "--top-k", "2", "--embedder", "tfidf", "--json"])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["meta"]["skills_mode"] == "search" and len(rec["meta"]["fired"]) == 2
    assert rec["meta"]["fired"][0] == "binary-search-bisect"
    assert json.loads(res.stdout)["skills"][0]["recall"] == 1.0


def test_changed_runs_only_the_edited_skills_queries(tmp_path, monkeypatch):
    """--changed BASELINE: after an edit of one skill, only the queries that name it or that it took
    before run again (records of the old library are history, not reused), and only it is reported."""
    import shutil

    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    lib = tmp_path / "skills"
    shutil.copytree(DEMO, lib)
    out, q = tmp_path / "t.jsonl", _queries(tmp_path)
    base = ["triggers", "--skills", str(lib), "--queries", str(q), "--out", str(out), "--agent",
            "trigger_agents:best_match", "--epochs", "1", "--embedder", "tfidf"]
    res = CliRunner().invoke(cli, [*base, "--json"])
    assert res.exit_code == 0, res.output
    baseline = tmp_path / "baseline.json"
    baseline.write_text(res.stdout)
    res = CliRunner().invoke(cli, [*base, "--changed", str(baseline), "--json"])
    assert res.exit_code == 0 and "changed since" in res.output and json.loads(res.stdout)["skills"] == []
    md = lib / "tally-element-occurrences" / "SKILL.md"
    md.write_text(md.read_text().replace("Tally how many times", "Tally, for reports, how many times"))
    res = CliRunner().invoke(cli, [*base, "--changed", str(baseline), "--json"])
    assert res.exit_code == 0, res.output
    assert f"changed since {baseline}: 1 of 30 skill(s) (tally-element-occurrences)" in res.output
    # neg-1 names it in should_not; count-1 and count-3 were taken by it
    assert "triggers: 3 episode(s) to run (3 queries x 1 epoch(s), 0 already logged)" in res.output
    doc = json.loads(res.stdout)
    assert [s["skill_id"] for s in doc["skills"]] == ["tally-element-occurrences"]
    assert doc["changed"] == {"baseline": str(baseline), "skills": ["tally-element-occurrences"], "removed": []}
    assert len(out.read_text().splitlines()) == 6 + 3
    res = CliRunner().invoke(cli, [*base, "--changed", str(q)])
    assert res.exit_code == 2 and "not JSON" in res.output


# ---------------------------------------------------------------- the trigger view of paired runs
def _poacher_log(path: Path) -> Path:
    """60 tasks of one model: a poacher fires on 20 tasks that expect good-a and harms 12 of them;
    good-a, where it fires, rescues 5 of 10; body-bad fires where expected and harms 6 of 20; 10
    unlabelled tasks use a neutral skill."""
    recs = []
    for t in range(60):
        if t < 20:
            exp, fired, dis, en = ["good-a"], ["poacher"], True, t >= 12
        elif t < 30:
            exp, fired, dis, en = ["good-a"], ["good-a"], t >= 25, True
        elif t < 50:
            exp, fired, dis, en = ["body-bad"], ["body-bad"], True, t >= 36
        else:
            exp, fired, dis, en = None, ["neutral"], True, True
        meta = {"expected_skills": exp} if exp else {}
        recs.append({"task_id": f"t{t}", "condition": "disabled", "correct": dis, "model": "m", "meta": meta})
        recs.append({"task_id": f"t{t}", "condition": "enabled", "correct": en, "model": "m", "meta": meta,
                     "retrievals": [{"query": "q", "skills": [{"id": s} for s in fired]}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_the_shadowing_split_attributes_the_loss_to_the_poacher(tmp_path):
    """The library's net loss of 13 tasks: 12 where the wrong skill (the poacher) was chosen, so the
    shadowing share is 12/13; the poacher's rewrite target is its description, body-bad's its body."""
    from skillaudit.analysis.triggers import target_sentence, trigger_view
    from skillaudit.runs.inputs import load_inputs

    inputs = load_inputs([str(_poacher_log(tmp_path / "runs.jsonl"))], offered=True)
    assert len(inputs.expected) == 50
    (view,) = trigger_view(inputs.runs, inputs.expected)
    split = view["split"]
    assert (split["wrong_skill"]["net"], split["right_skill"]["net"], split["net"]) == (-12, -1, -13)
    assert split["shadowing_share"] == pytest.approx(12 / 13, abs=1e-4)
    _, hi = split["wrong_skill"]["ci"]
    assert hi < 0 and split["wrong_skill"]["rae"] == pytest.approx(-12 / 20)
    by = {s["skill_id"]: s for s in view["skills"]}
    assert by["poacher"]["target"] == "description" and by["body-bad"]["target"] == "body"
    assert by["good-a"]["target"] is None and "target" not in by["neutral"]
    assert by["poacher"]["confusion"] == {"expected_fired": 0, "expected_not_fired": 0, "fired_not_expected": 20}
    assert by["good-a"]["confusion"] == {"expected_fired": 10, "expected_not_fired": 20, "fired_not_expected": 0}
    assert by["poacher"]["did_not_help_share"] == 1.0 and by["good-a"]["did_not_help_share"] == 0.5
    assert target_sentence(by["poacher"]) == ("rewrite its description: net -12 over 20 task(s) where another skill "
                                              "was expected, +0 over 0 where it was expected")


def test_task_files_carry_expected_skills_to_the_records(tmp_path, monkeypatch):
    """`expected_skills` of a task file is checked against the library and copied to meta.expected_skills
    of both records (the agent never sees it)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": "percent change from 4 to 5?", "answer": "25", "match": "number",
                                 "expected_skills": ["percent-change"]}) + "\n")
    out = tmp_path / "runs.jsonl"
    res = CliRunner().invoke(cli, ["run", "--tasks", str(tasks), "--skills", DEMO, "--agent", "trigger_agents:seen",
                                   "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["meta"]["expected_skills"] for r in recs] == [["percent-change"]] * 2
    assert all("expected" not in r["answer"] for r in recs)  # the agent echoes the task it was given
    tasks.write_text(json.dumps({"id": "a", "prompt": "p", "answer": "1", "match": "number",
                                 "expected_skills": ["percent-chnage"]}) + "\n")
    res = CliRunner().invoke(cli, ["run", "--tasks", str(tasks), "--skills", DEMO, "--agent", "trigger_agents:seen",
                                   "--out", str(tmp_path / "o2.jsonl"), "--quiet"])
    assert res.exit_code == 2
    assert res.output == (f"Error: {tasks}:1: `expected_skills`: no skill named 'percent-chnage' in the library "
                          "(did you mean 'percent-change'?)\n")


def test_audit_reports_the_trigger_view(tmp_path):
    """audit.json carries the trigger view; report.md and report.html show the shadowing split and the
    should-fire-against-fired table (skill names escaped)."""
    runs = _poacher_log(tmp_path / "runs.jsonl")
    lib = _write_library(tmp_path / "skills", {"poacher": "Count things in lists.", "good-a": "Count element frequency.",
                                               "body-bad": "Parse dates.", "neutral": "Format output."})
    out = tmp_path / "report"
    res = CliRunner().invoke(cli, ["audit", str(runs), "--skills", str(lib), "--out", str(out), "--embedder", "tfidf",
                                   "--bootstrap", "200", "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text())
    (view,) = doc["triggers"]
    assert view["split"]["shadowing_share"] == pytest.approx(12 / 13, abs=1e-4)
    md = (out / "report.md").read_text()
    assert "## Does each skill fire where it should" in md
    assert "| m | net -12 over 20 task(s), -60.0 pp [" in md and "| **92%** | 0 |" in md
    assert "| m | `poacher` | 0 | 0 | 20 | net -12 over 20 task(s)" in md and md.count("| description |") == 1
    html = (out / "report.html").read_text()
    assert '<h2 id="triggers">' in html and "<code>body-bad</code>" in html


def test_distractor_sweep_reports_reach_as_the_catalog_grows(tmp_path, monkeypatch):
    """--distractors 10,200: each query runs in catalogs of 30, 40 and 230 skills (nested, by name);
    an agent that loses half its queries to distractors past 100 skills keeps its reach at 40 and
    loses it at 230, where distractors fire."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    out = tmp_path / "t.jsonl"
    args = ["triggers", "--skills", DEMO, "--queries", str(_queries(tmp_path)), "--out", str(out), "--agent",
            "trigger_agents:crowded", "--epochs", "1", "--distractors", "200,10", "--embedder", "tfidf"]
    res = CliRunner().invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    assert "triggers: 18 episode(s) to run (6 queries x 1 epoch(s) x 3 catalog size(s)" in res.output
    sweep = json.loads(res.stdout)["sweep"]
    assert [(r["distractors"], r["catalog_size"], r["n_runs"]) for r in sweep] == [(0, 30, 6), (10, 40, 6),
                                                                                  (200, 230, 6)]
    assert sweep[0]["reach"] == sweep[1]["reach"] > sweep[2]["reach"]
    assert sweep[0]["distractor_fired"] == 0 and sweep[2]["distractor_fired"] > 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["task_id"] for r in recs if r["meta"]["distractors"] == 10} == {f"{q['id']}#d10" for q in QUERIES}
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0 and "reach as the catalog grows (5 queries that should fire a skill" in res.output
    res = CliRunner().invoke(cli, [*args[:-4], "--distractors", "500", "--embedder", "tfidf"])
    assert res.exit_code == 2 and "--distractors 500: the bundled set has 219 distractor skills" in res.output


FAKE_HARBOR = r'''#!PYTHON
"""A stand-in for `harbor run -c CONFIG`: one trial per task and attempt of the with-skills agent; its
terminus-2-like ATIF log lists the injected skills and reads the one whose name shares a word with
the instruction (percent -> percent-change; "how many times" -> tally-element-occurrences)."""
import json, os, sys, time
from pathlib import Path

args = sys.argv[1:]
with Path(os.environ["FAKE_HARBOR_LOG"]).open("a") as fh:
    fh.write(" ".join(args) + "\n")
if args[:2] == ["jobs", "resume"]:
    sys.exit(0)
cfg = json.loads(Path(args[args.index("-c") + 1]).read_text())
assert len(cfg["agents"]) == 1 and cfg["agents"][0]["skills"], "a triggers job has the with-skills agent only"
job = Path(cfg["jobs_dir"]) / cfg["job_name"]
job.mkdir(parents=True)
(job / "config.json").write_text(json.dumps(cfg))
ds = Path(cfg["datasets"][0]["path"])
for task in cfg["datasets"][0]["task_names"]:
    text = (ds / task / "instruction.md").read_text().lower()
    pick = ("percent-change" if "percent" in text else "tally-element-occurrences" if "how many times" in text
            else None)
    for k in range(cfg["n_attempts"]):
        trial = job / f"{task}__t{k}"
        (trial / "agent").mkdir(parents=True)
        steps = [{"step_id": 1, "source": "user", "message": "<available_skills><skill><name>percent-change</name>"
                  "</skill><skill><name>tally-element-occurrences</name></skill></available_skills>" + text}]
        if pick:
            steps.append({"step_id": 2, "source": "agent", "tool_calls": [
                {"tool_call_id": "c1", "function_name": "bash_command",
                 "arguments": {"keystrokes": f"cat /runtime/skills/{pick}/SKILL.md\n"}}]})
        (trial / "agent" / "trajectory.json").write_text(json.dumps({"schema_version": "ATIF-v1.8", "steps": steps}))
        (trial / "result.json").write_text(json.dumps({
            "task_name": task, "trial_name": trial.name, "started_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "config": {"job_id": cfg["job_name"] + "-id", "task": {"path": str(ds / task)},
                       "agent": {"name": "terminus-2", "model_name": "openai/m", "skills": cfg["agents"][0]["skills"]}},
            "verifier_result": {"rewards": {"reward": 1.0}}, "exception_info": None}))
'''


def test_harbor_engine_runs_each_query_as_a_task_with_the_skills_injected(tmp_path, monkeypatch):
    """--engine harbor (through a stand-in harbor): a task per query (the query as its instruction,
    nothing graded), one job with the with-skills agent only, skill use read from each trial's own
    log; recall and the poacher as with the other engines; a re-run resumes the job, writes nothing twice."""
    import stat
    import sys

    exe = tmp_path / "harbor"
    exe.write_text(FAKE_HARBOR.replace("PYTHON", sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("SKILLAUDIT_HARBOR", str(exe))
    monkeypatch.setenv("FAKE_HARBOR_LOG", str(tmp_path / "calls.log"))
    out = tmp_path / "t.jsonl"
    args = ["triggers", "--skills", DEMO, "--queries", str(_queries(tmp_path)), "--out", str(out), "--engine", "harbor",
            "--agent-name", "terminus-2", "--model", "openai/m", "--epochs", "2", "--embedder", "tfidf", "--quiet"]
    res = CliRunner().invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    by = {s["skill_id"]: s for s in doc["skills"]}
    assert by["percent-change"]["recall"] == 1.0
    assert by["counter-frequency-counting"]["rivals"] == [{"skill_id": "tally-element-occurrences", "queries": 2}]
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == 12 and {r["model"] for r in recs} == {"terminus-2:openai/m"}
    assert {r["meta"]["harbor_task"] for r in recs} == {f"q-{i:04d}" for i in range(1, 7)}
    task = tmp_path / "t.jsonl.harbor" / "tasks" / "q-0004"
    assert (task / "instruction.md").read_text() == QUERIES[3]["query"] + "\n"
    assert "echo 1 > /logs/verifier/reward.txt" in (task / "tests" / "test.sh").read_text()
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert len(out.read_text().splitlines()) == 12
    assert ("triggers: 0 episode(s) to run (6 queries x 2 epoch(s), 12 already logged), tokens not estimated "
            "(Harbor's agent decides its own prompts)") in res.output
    assert [c.split()[0] for c in (tmp_path / "calls.log").read_text().splitlines()] == ["run"]


def test_harbor_engine_refuses_what_it_cannot_honour(tmp_path):
    """One Harbor job runs every query: a token budget, a distractor sweep or a Python agent cannot apply."""
    base = ["triggers", "--skills", DEMO, "--queries", str(_queries(tmp_path)), "--out", str(tmp_path / "t.jsonl"),
            "--engine", "harbor", "--agent-name", "terminus-2"]
    for extra in (["--budget-tokens", "1000"], ["--distractors", "10"], ["--agent", "trigger_agents:coin"]):
        res = CliRunner().invoke(cli, [*base, *extra])
        assert res.exit_code == 2 and res.output == (
            "Error: --engine harbor runs Harbor's agent (--agent-name) as one job: not with --agent, --distractors "
            "or --budget-tokens\n")

