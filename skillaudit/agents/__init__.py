"""The built-in chat agents and the agent protocol: the search and catalog loops, skill retrieval (BM25).

Layer (pyproject.toml `[tool.importlinter]`): May import tasks, sandbox, runs, library, stats, util, errors; never importers, engine or above.
"""
