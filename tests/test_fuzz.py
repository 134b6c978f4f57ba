"""The differential fuzz campaign of bench/fuzz_runs.py, small: 0 tracebacks, exit codes 0/2 only,
and the three reader paths (C scanner, msgspec, exact) agree on every generated log.

SKILLAUDIT_FUZZ_LOGS=2000 runs the full campaign (the figures in the issue-16 note)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "fuzz_runs.py"


def _campaign():
    spec = importlib.util.spec_from_file_location("fuzz_runs", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_fuzzed_logs_never_traceback_and_the_three_paths_agree(tmp_path):
    fuzz = _campaign()
    n = int(os.environ.get("SKILLAUDIT_FUZZ_LOGS", "300"))
    t = fuzz.run_campaign(n, seed=16, cli_sample=int(os.environ.get("SKILLAUDIT_FUZZ_CLI_SAMPLE", "2")),
                          workdir=str(tmp_path), show=3)
    assert t.logs == n and 0 < t.gz < n
    assert t.tracebacks == 0, t.examples
    assert t.disagreements == 0, t.examples
    assert set(t.exit_codes) <= {0, 2}, (t.exit_codes, t.examples)
    assert t.exit_codes[0] and t.exit_codes[2]  # both valid and hostile logs were generated
