"""Decisions from the analyses: the policy's rule table, the recommendations, the CI gate.

Layer (pyproject.toml `[tool.importlinter]`): May import analysis and everything below; never report or commands.
"""
