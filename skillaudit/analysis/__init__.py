"""The analyses of paired runs: one module per analysis (metrics, attribution, library effect, ...)."""
