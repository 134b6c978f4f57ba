"""The `skillaudit` commands, one module per concept; `skillaudit.cli` puts them in one click group.

`analyse` (metrics, rank, cost, prune, clusters, graph), `audit` (audit, compare, check, diff),
`run` (run, verify, simulate), `logs` (validate, import, export); `_shared` holds what they share
(errors as one-line messages, the shared options, output, reading the inputs with warnings).

Layer (pyproject.toml `[tool.importlinter]`): May import every folder below it (report, decide, analysis, engine, importers, ...); only cli imports it.
"""
