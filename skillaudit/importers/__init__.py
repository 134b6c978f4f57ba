"""Importers: convert other eval frameworks' logs into DESIGN §3.1 paired run logs.

Each importer is a function returning `(records, ImportReport)`: the records of every pair (enabled
then disabled), and a report of what was read and what could not be paired and why. They raise
`ImportFormatError` (naming the file, and the line where there is one) on a file of the wrong format.

- `inspect_ai_log.import_inspect`: Inspect AI `.eval` / `.json` logs (needs the `inspect` extra)
- `evalplus.import_evalplus`: EvalPlus `*_eval_results.json`
- `lm_eval.import_lm_eval`: lm-evaluation-harness `samples_<task>_<date>.jsonl`
- `skillsbench.import_skillsbench`: SkillsBench per-trial results, leaderboard files, results registry
- `harbor.import_harbor`: Harbor job / trial folders (skill use from Claude Code trajectories)

Layer (pyproject.toml `[tool.importlinter]`): May import runs, library, stats, util, errors; never agents, engine, analysis or above.
"""

from skillaudit.importers._common import (
    ImportReport,
    Unpaired,
    check_output,
    dumps_records,
    write_records,
)

FORMATS = ("inspect", "evalplus", "lm-eval", "skillsbench", "harbor")

__all__ = ["FORMATS", "ImportReport", "Unpaired", "check_output", "dumps_records", "write_records"]
