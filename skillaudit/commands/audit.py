"""Commands that judge a whole library: `audit` (the report), `compare` (Figure 1 across models),
`check` (the CI gate) and `diff` (what changed between two audits)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import click

from skillaudit.analysis.methods import METRICS_BOOT_HELP, threshold_help
from skillaudit.commands._shared import (
    CommandError,
    attribution_option,
    bootstrap_option,
    echo,
    emit_json,
    jobs_option,
    json_option,
    load_inputs_for_cli,
    load_library_for_cli,
    mc_stop_option,
    min_cond_option,
    prepare_for_cli,
    quiet_option,
    reports_errors,
    runs_argument,
    seed_option,
    skills_option,
    strict_option,
    warn,
)


# ---------------------------------------------------------------- audit / compare
def _progress(quiet: bool) -> Callable[[str], None] | None:
    """Progress lines on stderr (never stdout, so --json stays clean); None with --quiet."""
    if quiet:
        return None

    def say(message: str) -> None:
        echo(f"skillaudit: {message}", err=True)

    return say


@click.command(short_help="The whole audit as one report (HTML, Markdown, JSON, CSV, figures).")
@click.argument("runs", nargs=-1, required=False, metavar="[RUNS...]")
@skills_option()
@click.option("--out", "out_dir", default="skillaudit-report", show_default=True,
              type=click.Path(file_okay=False),
              help="Report folder; replaced atomically, and only if it is new, empty or a previous report.")
@click.option("--embedder", type=click.Choice(["minilm", "tfidf"]), default="minilm", show_default=True,
              help="Skill embeddings for clusters and near-duplicates: minilm (offline model) or tfidf.")
@click.option("--embed-model", type=click.Path(), default=None,
              help="A sentence-transformers model folder to use instead of all-MiniLM-L6-v2.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Embedding cache folder (default: $SKILLAUDIT_CACHE_DIR or the user cache dir).")
@click.option("--threshold", type=click.FloatRange(-1.0, 1.0), default=None,
              help=threshold_help())
@attribution_option
@min_cond_option()
@bootstrap_option(METRICS_BOOT_HELP)
@click.option("--regression-bootstrap", "reg_boot", default=2000, show_default=True,
              type=click.IntRange(min=0),
              help="Bootstrap resamples of the per-skill regression CIs (capped at --bootstrap); "
                   "lower it for libraries of thousands of skills; 0 = no regression.")
@seed_option("Seed of every resampling step.")
@mc_stop_option
@jobs_option
@strict_option
@quiet_option
@json_option
@reports_errors
def audit(runs: tuple[str, ...], skills_path: str | None, out_dir: str, embedder: str,
          embed_model: str | None, cache_dir: str | None, threshold: float | None, attribution: str,
          min_cond: int, n_boot: int, reg_boot: int, seed: int, mc_stop: str, jobs: int, strict: bool,
          quiet: bool, as_json: bool) -> None:
    """The whole audit in one report folder: report.html, report.md, audit.json, skills.csv, figures/.

    Runs metrics, per-skill attribution, clusters, near-duplicates, recommendations and the
    co-retrieval graph; the HTML page is self-contained (no script, no network) and printable.
    With no RUNS and no --skills it audits the bundled demo (sample_runs/ against skills/). The
    --out folder is replaced only once the new report is complete, so a failed audit leaves the
    previous report intact. Progress goes to stderr (--quiet silences it).
    """
    from skillaudit.audit import Settings, run_audit
    from skillaudit.demo import demo_paths
    from skillaudit.report.write import check_out_dir, write_report

    demo = False
    if not runs and skills_path is None:
        d = demo_paths()
        runs, skills_path, demo = tuple(str(p) for p in d.runs), str(d.skills), True
    elif not runs:
        raise click.UsageError("give the run logs to audit (RUNS...), or nothing at all for the bundled demo")
    say = _progress(quiet)
    inputs = [*runs, *([skills_path] if skills_path else [])]
    check_out_dir(out_dir, inputs)  # fail before the long steps
    from skillaudit.util.files import folder_lock

    # one writer per --out folder: a second audit into it fails now, not after the long steps
    click.get_current_context().with_resource(folder_lock(out_dir))
    if say and demo:
        say(f"auditing the bundled demo: {len(runs)} run log(s) against {skills_path}")
    lib = load_library_for_cli(skills_path)
    loaded = load_inputs_for_cli(runs, strict, lib, jobs, cost=True, digests=True, integrity=True)
    settings = Settings.for_audit(embedder=embedder, embed_model=embed_model, cache_dir=cache_dir,
                                  near_duplicate_threshold=threshold, n_boot=n_boot, regression_boot=reg_boot,
                                  seed=seed, min_cond=min_cond, attribution=attribution, strict=strict, demo=demo,
                                  jobs=jobs, mc_stop=mc_stop == "on")
    audit = run_audit(prepare_for_cli(loaded, settings), progress=say)
    result = audit.document
    used = result.inputs["settings"].get("embedder_used")
    if used and used != embedder:
        warn(f"the {embedder} embedder could not be loaded; clusters use {used} instead")
    written = write_report(audit, out_dir, inputs=inputs, progress=say)
    if as_json:
        from pathlib import Path

        from skillaudit.util.documents import read_document

        doc = read_document(Path(written["out"]) / "audit.json", max_depth=1000)
        emit_json({**doc, "report": written})
        return
    from skillaudit.report.headline import (
        MAX_MODEL_LINES,
        bundle_lines,
        model_table,
        terminal_lines,
    )

    h = result.headline
    for line in terminal_lines(h):
        echo(line)
    if len(h["per_model"]) > MAX_MODEL_LINES:
        echo(f"All {len(h['per_model'])} models:")
        for line in model_table(h["per_model"]):
            echo(line)
    if h.get("bundles"):
        for line in bundle_lines(h["bundles"]):
            echo(line)
    echo(f"Report: {written['report']} (every figure and test; also report.md, audit.json, skills.csv)")


@click.command()
@runs_argument()
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False), default=None,
              help="Write Figure 1 (PNG) to this file.")
@click.option("--benchmark", default=None,
              help="Compare the models on this benchmark only (default: each model's benchmarks pooled).")
@min_cond_option("A model")
@bootstrap_option(METRICS_BOOT_HELP)
@seed_option()
@jobs_option
@strict_option
@quiet_option
@json_option
@reports_errors
def compare(runs: tuple[str, ...], out_file: str | None, benchmark: str | None, min_cond: int,
            n_boot: int, seed: int, jobs: int, strict: bool, quiet: bool, as_json: bool) -> None:
    """The paper's Figure 1 across models: aggregate lift (x) against RAE (y), with 95% CIs.

    A model in a shaded quadrant shows sign disagreement: the usual aggregate number (tasks that
    retrieved skills vs tasks that did not) says the opposite of running the same tasks with and
    without skills. Prints the table behind the figure; --out writes the PNG.
    """

    from skillaudit.report.compare import compare_doc
    from skillaudit.report.figures import figure1
    from skillaudit.report.render import console, pp, pp_ci, pval
    from skillaudit.util.files import atomic_write_bytes

    say = _progress(quiet)
    if out_file is not None and any(os.path.abspath(out_file) == os.path.abspath(r) for r in runs):
        raise CommandError(f"--out {out_file}: is one of the run logs; choose another file")
    from skillaudit.audit import Settings, prepare, run_audit

    inputs = load_inputs_for_cli(runs, strict, jobs=jobs, adherence=False, arms=False, provenance=False)
    if benchmark is not None and benchmark not in inputs.runs.benchmarks:
        raise CommandError(f"--benchmark {benchmark}: not in these runs "
                           f"(benchmarks: {', '.join(inputs.runs.benchmarks)})")
    settings = Settings(benchmark=benchmark, min_cond=min_cond, n_boot=n_boot, seed=seed, judge_offered=False)
    audit = run_audit(prepare(inputs, settings), until="metrics", progress=say)
    paired, result = audit.runs, audit.metrics
    doc = compare_doc(result.to_dict(), benchmark, figure=out_file)
    if len(doc["models"]) < 2:
        warn("Figure 1 compares models; these runs hold only one")
    if out_file is not None:
        png = figure1(doc["models"], title=None if benchmark is None else f"Aggregate lift vs RAE on {benchmark}")
        if png is None and paired.n_pairs and paired.use_unlogged.all():
            raise CommandError("skill use not logged: Figure 1 (aggregate lift vs RAE) needs to know which runs "
                               "used skills, and these runs say only which were offered; nothing to draw",
                               exit_code=1)
        if png is None:
            raise CommandError("no model has both an aggregate lift and an RAE (need retrieving and "
                               "non-retrieving tasks); nothing to draw", exit_code=1)
        atomic_write_bytes(out_file, png)
    if as_json:
        emit_json(doc)
        return
    from rich.text import Text

    from skillaudit.report.render import Table

    t = Table(title="Aggregate lift vs RAE per model (percentage points; 95% CI)")
    for col, just in [("model", "left"), ("benchmark", "left"), ("pairs", "right"), ("retrieved", "right"),
                      ("agg lift", "right"), ("lift CI", "right"), ("RAE", "right"), ("RAE CI", "right"),
                      ("b/c", "right"), ("p", "right"), ("", "left")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in doc["models"]:
        flag = ("⚠ sign" if r["sign_disagreement"] else "") + ("" if r["reportable"] else " n<min")
        t.add_row(r["model"], "all" if r["benchmark"] == "*" else r["benchmark"], str(r["n_pairs"]),
                  str(r["n_cond"]), pp(r["agg_lift"]), pp_ci(r["agg_lift_ci"]), pp(r["rae"]),
                  pp_ci(r["rae_ci"]), f"{r['cond_b']}/{r['cond_c']}", pval(r["p_cond"]),
                  Text(flag.strip(), style="bold red" if r["sign_disagreement"] else ""),
                  style="" if r["reportable"] else "dim")
    out = console()
    out.print(t)
    if doc["n_sign_disagreement"]:
        out.print(f"⚠ sign: {doc['n_sign_disagreement']} of {len(doc['models'])} model(s) — the aggregate "
                  "lift says the opposite of running the same tasks with and without skills.")
    from skillaudit.analysis.methods import bootstrap_words

    tests = sorted({r["p_cond_test"] for r in doc["models"] if r["p_cond_test"]})
    if tests:
        out.print("p: " + "; ".join(tests) + " on the retrieval-triggered pairs, the task as the unit; the RAE "
                  f"CI inverts it (excludes 0 exactly when p <= 0.05). lift CI: {bootstrap_words(n_boot, seed)}.")
    if out_file is not None:
        out.print(f"Figure 1: {os.path.abspath(out_file)}")


# ---------------------------------------------------------------- check / diff (CI gate)
CHECK_FORMATS = ("text", "json", "sarif", "junit", "github", "markdown")

@click.command()
@runs_argument()
@skills_option()
@click.option("--baseline", type=click.Path(dir_okay=False), default=None,
              help="A stored audit.json (last known good) to compare against.")
@click.option("--fail-on", "fail_on", multiple=True, type=click.Choice(["harmful", "library", "regression"]),
              help="What fails the gate (repeatable; default: harmful, plus regression with --baseline).")
@click.option("--allow-leaks", is_flag=True,
              help="Do not fail on arm integrity: runs without skills that used skills or had skills present, runs without skills whose log could not be checked, runs with skills given none.")
@click.option("--format", "fmt", type=click.Choice(CHECK_FORMATS), default=None,
              help="What stdout holds: text (one line per failure; the default), json, sarif (SARIF 2.1.0, rules "
                   "from the policy's table), junit (JUnit XML, a test case per decision), github (workflow "
                   "commands: annotations on the skill files) or markdown (a short summary). With "
                   "$GITHUB_STEP_SUMMARY set, the Markdown summary is also appended there.")
@click.option("--report", "reports", multiple=True, metavar="FORMAT:PATH",
              help="Also write FORMAT (json, sarif, junit, github, markdown) to PATH, atomically (repeatable).")
@bootstrap_option(METRICS_BOOT_HELP)
@seed_option()
@mc_stop_option
@jobs_option
@strict_option
@json_option
@reports_errors
def check(runs: tuple[str, ...], skills_path: str | None, baseline: str | None, fail_on: tuple[str, ...],
          allow_leaks: bool, fmt: str | None, reports: tuple[str, ...], n_boot: int, seed: int, mc_stop: str,
          jobs: int, strict: bool, as_json: bool) -> None:
    """A CI gate for a skill library: exit 1 with one line per failing skill or verdict, else 0.

    harmful: a skill recommended prune (or rewrite because it is harmful); library: a model
    whose harm is library-wide; regression (needs --baseline): a newly harmful skill, a verdict
    that got worse, or an RAE that fell with the change's 95% CI below 0. Always, unless
    --allow-leaks: arm integrity (a run without skills that used one, a run with skills given none).
    """
    import time

    from skillaudit.audit import Settings, run_audit
    from skillaudit.decide.gate import check as _check
    from skillaudit.decide.gate import check_document, load_audit_doc

    t0 = time.monotonic()
    if as_json and fmt not in (None, "json"):
        raise CommandError(f"--json and --format {fmt}: give one")
    fmt = "json" if as_json else (fmt or "text")
    targets = [_report_target(r) for r in reports]  # bad FORMAT:PATH fails before the audit
    fail_on = fail_on or (("harmful", "regression") if baseline else ("harmful",))
    base = load_audit_doc(baseline) if baseline else None
    lib = load_library_for_cli(skills_path)
    inputs = load_inputs_for_cli(runs, strict, lib, jobs, adherence=False, integrity=True)
    # the audit's flow to its recommendations, without embeddings (no merge checks)
    settings = Settings(n_boot=n_boot, seed=seed, embedder="none", jobs=jobs,
                        skip=("efficiency", "cost", "clusters"),
                        mc_stop=mc_stop == "on")
    audit = run_audit(prepare_for_cli(inputs, settings), until="recommendations")
    doc = check_document(audit.metrics, audit.attribution, audit.recommendations)
    failures = _check(doc, tuple(fail_on), base)
    if not allow_leaks:
        from skillaudit.analysis.integrity import arm_integrity
        from skillaudit.decide.gate import Failure

        failures = [Failure("integrity", m) for m in arm_integrity(inputs).messages()] + failures
    def render(kind: str) -> str:
        from skillaudit.report import ci
        from skillaudit.util.files import dumps_json

        if kind == "json":
            return dumps_json({"schema": "skillaudit.check/v1", "passed": not failures, "fail_on": list(fail_on),
                               "baseline": baseline, "failures": [f.to_dict() for f in failures],
                               "inputs": list(runs), **doc}).decode() + "\n"
        if kind == "sarif":
            return json.dumps(ci.to_sarif(doc, failures, skills_path, lib), indent=2) + "\n"
        if kind == "github":
            return ci.to_github(doc, failures, skills_path, lib)
        if kind == "markdown":
            return ci.to_markdown(doc, failures, tuple(fail_on), base, audit.runs.n_pairs)
        return ci.to_junit(doc, failures, tuple(fail_on), seconds=time.monotonic() - t0)

    for kind, path in targets:
        from skillaudit.util.files import atomic_write_text

        atomic_write_text(path, render(kind))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:  # GitHub Actions: the job's summary page (appended: earlier steps wrote theirs)
        try:
            with open(step_summary, "a", encoding="utf-8") as fh:
                fh.write(render("markdown"))
        except OSError as exc:
            raise CommandError(f"$GITHUB_STEP_SUMMARY {step_summary}: cannot append ({exc.strerror or exc})") from None
    if fmt != "text":
        click.echo(render(fmt), nl=False)
    else:
        for f in failures:
            echo(f"FAIL {f.kind}: {f.message}")
        if not failures:
            echo(f"ok: nothing fails ({', '.join(fail_on)}) on {audit.runs.n_pairs} pairs")
    if failures:
        click.get_current_context().exit(1)


def _report_target(spec: str) -> tuple[str, str]:
    """`--report FORMAT:PATH` as (format, path)."""
    kind, sep, path = spec.partition(":")
    if not sep or not path or kind not in CHECK_FORMATS[1:]:
        raise CommandError(f"--report {spec}: expected FORMAT:PATH with FORMAT one of {', '.join(CHECK_FORMATS[1:])}")
    return kind, path


@click.command("diff")
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
@json_option
@reports_errors
def diff_cmd(old: str, new: str, as_json: bool) -> None:
    """What changed between two audits (audit.json or check --json): verdicts, RAE, skill actions."""
    from skillaudit.decide.gate import diff, load_audit_doc
    from skillaudit.report.render import pp, pp_ci

    d = diff(load_audit_doc(old), load_audit_doc(new))
    if as_json:
        emit_json({**d, "old": old, "new": new})
        return
    for m in d["models"]:
        change = f", change {pp(m['rae_change'])} pp {pp_ci(m['rae_change_ci'])}" if m["rae_change"] is not None else ""
        echo(f"{m['model']}: verdict {m['old_verdict']} -> {m['new_verdict']}; RAE {pp(m['old_rae'])} -> "
                   f"{pp(m['new_rae'])} pp{change}")
    for x in d["library"]:
        where = "" if x["benchmark"] == "*" else f" on {x['benchmark']}"
        echo(f"library {x['model']}{where}: {x['old']} -> {x['new']}")
    for x in d["skills"]:
        echo(f"{x['skill_id']} ({x['model']}): {x['old'] or 'absent'} -> {x['new'] or 'absent'}")
    if not (d["library"] or d["skills"]):
        echo("no skill action or library verdict changed")
