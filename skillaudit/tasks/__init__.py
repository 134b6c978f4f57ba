"""Tasks: the benchmark loaders, where their data lives on a user's machine, a maintainer's own task files."""
