"""The analyses of paired runs: one module per analysis (metrics, attribution, library effect, ...).

Layer (pyproject.toml `[tool.importlinter]`): May import runs, library, stats, util, errors; never decide, report or commands, nor importers.
"""
