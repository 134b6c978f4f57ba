"""Plumbing every layer may use: atomic files, bounded JSON documents, terminal escaping, the plugin
registry (entry-point names only: it imports no agent or grader until one is asked for).

Layer (pyproject.toml `[tool.importlinter]`): May import errors only.
"""
