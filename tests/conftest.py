"""Shared fixtures: write run logs and libraries into tmp folders."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[..., Path]:
    """Write records (dicts, or raw strings written as they are) to a JSON Lines file."""

    def _write(records: Iterable[dict | str], name: str = "runs.jsonl") -> Path:
        path = tmp_path / name
        with path.open("w", encoding="utf-8") as fh:
            for rec in records:
                fh.write((rec if isinstance(rec, str) else json.dumps(rec)) + "\n")
        return path

    return _write
