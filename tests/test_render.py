"""Terminal tables: the direct writer for long piped tables draws exactly what rich draws."""

from __future__ import annotations

import io

import numpy as np
import pytest

from skillaudit.report import render
from skillaudit.report.render import CleanConsole, Table


def _table(n_rows: int, seed: int = 0, wide_cell: str = "") -> Table:
    rng = np.random.default_rng(seed)
    t = Table(title="Skills ranked by net rescues — m (most harmful first; pp = percentage points)")
    for col, just in [("skill", "left"), ("tasks (pairs)", "right"), ("coef pp", "right"),
                      ("coef 95% CI", "right"), ("", "left")]:
        t.add_column(col, justify=just)
    for i in range(n_rows):
        name = f"skill-{i:04d}" + ("-表記" if i % 7 == 0 else "") + wide_cell
        flag = ["", "≡ other-skill", "edited", "⚠ sign", "unused"][i % 5]
        coef = rng.normal(0, 5)
        t.add_row(name, f"{rng.integers(1, 900)} ({rng.integers(1, 2000)})", "–" if i % 9 == 0 else f"{coef:+.1f}",
                  f"[{coef - 2:+.1f}, {coef + 2:+.1f}]", flag, style="red" if i % 3 == 0 else "")
    return t


def _draw(table: Table, fast: bool, width: int = 160) -> str:
    buf = io.StringIO()
    old = render._FAST_ROWS
    render._FAST_ROWS = 200 if fast else 10**9
    try:
        CleanConsole(file=buf, highlight=False, width=width).print(table)
    finally:
        render._FAST_ROWS = old
    return buf.getvalue()


@pytest.mark.parametrize("seed", range(3))
def test_a_long_piped_table_is_rich_output_character_for_character(seed):
    """500 rows with wide (CJK) and symbol cells, left and right columns, an empty header, row styles: the direct writer's text equals rich's."""
    t = _table(500, seed)
    assert render._fast_table(t, 160) is not None  # the direct writer really draws it
    assert _draw(_table(500, seed), fast=True) == _draw(_table(500, seed), fast=False)


def test_a_table_too_wide_for_the_console_is_left_to_rich():
    """When the natural width exceeds the console, the writer declines and rich wraps it as before."""
    t = _table(300, wide_cell="-" + "x" * 120)
    assert render._fast_table(t, 160) is None
    assert _draw(_table(300, wide_cell="-" + "x" * 120), fast=True) == \
        _draw(_table(300, wide_cell="-" + "x" * 120), fast=False)


def test_a_cell_with_a_newline_is_left_to_rich():
    """A multi-line cell (rich splits it over lines) is drawn by rich."""
    t = _table(300)
    t.add_row("two\nlines", "1 (1)", "+1.0", "[+0.0, +2.0]", "")
    assert render._fast_table(t, 160) is None


def test_a_terminal_gets_rich_with_its_styles(monkeypatch):
    """On a terminal the direct writer is not used (rows keep their colours)."""
    called = []
    monkeypatch.setattr(render, "_fast_table", lambda *a: called.append(1))
    buf = io.StringIO()
    CleanConsole(file=buf, highlight=False, width=160, force_terminal=True).print(_table(300))
    assert not called and "\x1b[" in buf.getvalue()


def _long(n_rows: int, seed: int = 0, wide_cell: str = "") -> render.LongTable:
    t = _table(n_rows, seed, wide_cell)
    lt = render.LongTable(title=t.title.plain)
    for col in t.columns:
        lt.add_column(col.header, justify=col.justify)
    for i in range(t.row_count):
        lt.add_row(*(col._cells[i] for col in t.columns), style=t.rows[i].style or "")
    return lt


@pytest.mark.parametrize("wide", ["", "-" + "x" * 120])
def test_a_long_table_of_plain_rows_prints_as_rich_would(wide):
    """A LongTable (rank's rows kept as strings) prints exactly the rich Table it stands for: laid out directly when it fits, through rich when it would wrap."""
    buf = io.StringIO()
    CleanConsole(file=buf, highlight=False, width=160).print(_long(400, 1, wide))
    assert buf.getvalue() == _draw(_table(400, 1, wide), fast=False)


def test_rank_uses_a_long_table_only_when_piped():
    """table_for gives a LongTable for many rows on a pipe, a rich Table on a terminal or for few rows."""
    piped = CleanConsole(file=io.StringIO(), width=160)
    tty = CleanConsole(file=io.StringIO(), width=160, force_terminal=True)
    assert isinstance(render.table_for(piped, 500, "t"), render.LongTable)
    assert isinstance(render.table_for(piped, 50, "t"), Table)
    assert isinstance(render.table_for(tty, 500, "t"), Table)


def test_a_long_table_shows_terminal_controls_as_text():
    """A skill id carrying an OSC sequence reaches a piped long table as visible escapes, never raw."""
    lt = _long(300)
    lt.add_row("evil\x1b]0;pwned\x07-skill", "1 (1)", "+1.0", "[+0.0, +2.0]", "\x9b2J")
    buf = io.StringIO()
    CleanConsole(file=buf, highlight=False, width=160).print(lt)
    text = buf.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "evil\\x1b]0;pwned\\x07-skill" in text
