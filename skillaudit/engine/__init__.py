"""The episode engine: a run is a plan of episodes executed by one loop, then written.

- `options`: `RunOptions` (what the CLI fills in) and what follows from them alone: per-task
  seeds, the tasks a run covers, shards;
- `plan`: the episode plan (`Episode`: task, condition, epoch, arm, mask draw) made once from the
  options, less what the output already holds (resume);
- `reuse`: `--reuse OLD`: the records that cannot have changed are copied before planning;
- `episode`: what an agent sees of a task and how one episode's record is filled (an agent or
  harness failure is the record's `error`);
- `judging`: `grader: judge` tasks: the judge's score and, pairwise, the enabled record's
  preference once both runs of a (task, epoch) are in (`agents.judge` asks the judge model);
- `loop`: `execute`, the one run loop: bounded concurrency, progress, the summary's counts;
- `output`: the records already logged, their keys, the appending (fsynced) writer;
- `dispatch`: `run(opts)`, the run mode the options ask for (`harness.runner`: benchmark pairs and
  arms of the built-in search agent; `harness.taskrun`: task files, `--agent`, catalog mode and
  catalog arms), each a plan given to `loop.execute`.

Data flows one way: options -> plan -> loop -> output; no module here imports a run mode.

Layer (pyproject.toml `[tool.importlinter]`): May import agents, importers, tasks, sandbox, runs, library, stats, util, errors; never analysis or above.
"""
