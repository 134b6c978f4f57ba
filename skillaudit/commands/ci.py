"""`skillaudit ci init`: a GitHub Actions workflow that gates a skill library on every pull request.

The workflow it writes (`ci_workflow`): on a pull request that changes the skills, re-run only the
episodes the change can affect (`run --reuse` against the committed runs: unchanged skills'
episodes are copied, not re-run), then `check` the new runs against the committed baseline audit
(annotations on the skill files, SARIF uploaded to code scanning, the Markdown summary on the job's
page); on the main branch, the same re-run refreshes the committed runs and baseline.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from skillaudit.commands._shared import CommandError, echo, reports_errors

WORKFLOW = """\
# Written by `skillaudit ci init`. Secrets and variables (repository settings):
#   secrets.SKILLAUDIT_API_KEY   the endpoint's API key
#   vars.SKILLAUDIT_ENDPOINT     an OpenAI-compatible base URL, e.g. https://api.example.com/v1
#   vars.SKILLAUDIT_MODEL        the model name sent to it
name: skillaudit
on:
  pull_request:
    paths: [{skills_glob}]
  push:
    branches: [{branch}]
    paths: [{skills_glob}]
permissions:
  contents: write          # the main branch commits the refreshed runs and baseline
  security-events: write   # SARIF upload (code scanning)
jobs:
  skills:
    runs-on: ubuntu-latest
    timeout-minutes: 180
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with: {{python-version: "3.12"}}
      - name: install skillaudit
        run: pip install "skillaudit[harness]"
      - name: re-run only what the change can affect
        env:
          OPENAI_API_KEY: ${{{{ secrets.SKILLAUDIT_API_KEY }}}}
        run: >-
          skillaudit run {tasks} --skills {skills} --reuse {runs} --out new-runs.jsonl
          --endpoint "${{{{ vars.SKILLAUDIT_ENDPOINT }}}}" --model "${{{{ vars.SKILLAUDIT_MODEL }}}}" --quiet
      - name: gate the library
        if: github.event_name == 'pull_request'
        run: >-
          skillaudit check new-runs.jsonl --skills {skills} --baseline {baseline}
          --format github --report sarif:skillaudit.sarif
      - uses: github/codeql-action/upload-sarif@v3
        if: always() && github.event_name == 'pull_request'
        with: {{sarif_file: skillaudit.sarif}}
      - name: refresh the baseline
        if: github.event_name == 'push'
        run: |
          cp new-runs.jsonl {runs}
          skillaudit audit {runs} --skills {skills} --out {baseline_dir} --quiet
          git config user.name "skillaudit"
          git config user.email "skillaudit@users.noreply.github.com"
          git add {runs} {baseline_dir}
          git diff --cached --quiet || git commit -m "skillaudit: refresh the runs and the baseline audit"
          git push
"""


def ci_workflow(skills: str, tasks: str, runs: str, baseline_dir: str, branch: str = "main") -> str:
    """The workflow's YAML for these paths (each quoted for the shell)."""
    q = shlex.quote
    return WORKFLOW.format(skills_glob=q(skills.rstrip("/") + "/**"), branch=branch, skills=q(skills), tasks=tasks,
                           runs=q(runs), baseline=q(str(Path(baseline_dir) / "audit.json")),
                           baseline_dir=q(baseline_dir))


@click.group("ci")
def ci_group() -> None:
    """Set a repository up to gate its skill library in CI."""


@ci_group.command("init")
@click.option("--skills", "skills_path", default="skills", show_default=True, help="The library folder.")
@click.option("--tasks", "tasks_file", default=None, help="Your task file (docs/formats.md); or --benchmark.")
@click.option("--benchmark", default=None, help="A built-in benchmark (mbpp_plus, gsm8k, math500) instead of --tasks.")
@click.option("--runs", "runs_path", default="skillaudit/runs.jsonl", show_default=True,
              help="The committed paired runs (`skillaudit run ... --out` made them once).")
@click.option("--baseline", "baseline_dir", default="skillaudit/baseline", show_default=True,
              help="The committed baseline audit folder (`skillaudit audit --out`).")
@click.option("--branch", default="main", show_default=True, help="The branch whose pushes refresh the baseline.")
@click.option("--out", "out_path", default=".github/workflows/skillaudit.yml", show_default=True,
              help="Where the workflow is written.")
@click.option("--force", is_flag=True, help="Replace an existing file at --out.")
@reports_errors
def ci_init(skills_path: str, tasks_file: str | None, benchmark: str | None, runs_path: str, baseline_dir: str,
            branch: str, out_path: str, force: bool) -> None:
    """Write a GitHub Actions workflow: on a pull request that changes the skills, re-run only the
    affected episodes (run --reuse against the committed runs), then check them against the
    committed baseline (annotations, SARIF, step summary); on BRANCH, refresh runs and baseline."""
    from skillaudit.util.files import atomic_write_text

    if (tasks_file is None) == (benchmark is None):
        raise CommandError("give one of --tasks FILE or --benchmark NAME (what the runs run)")
    out = Path(out_path)
    if out.exists() and not force:
        raise CommandError(f"--out {out_path}: exists; pass --force to replace it")
    tasks = f"--tasks {shlex.quote(tasks_file)}" if tasks_file else f"--benchmark {shlex.quote(benchmark or '')}"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, ci_workflow(skills_path, tasks, runs_path, baseline_dir, branch))
    echo(f"wrote {out_path}: set secrets.SKILLAUDIT_API_KEY, vars.SKILLAUDIT_ENDPOINT and vars.SKILLAUDIT_MODEL; "
         f"commit {runs_path} (skillaudit run ... --out) and {baseline_dir}/ (skillaudit audit ... --out) first")
