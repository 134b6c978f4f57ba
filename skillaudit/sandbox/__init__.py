"""The scoring sandbox: untrusted answers run and scored in isolated processes (docs/sandbox.md).

Layer (pyproject.toml `[tool.importlinter]`): May import runs, library, stats, util, errors; never agents, analysis, report or the engine.
"""
