"""Tasks: the benchmark loaders, where their data lives on a user's machine, a maintainer's own task files.

Layer (pyproject.toml `[tool.importlinter]`): May import sandbox, runs, library, stats, util, errors.
"""
