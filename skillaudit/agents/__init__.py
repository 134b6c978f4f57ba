"""The built-in chat agents and the agent protocol: the search and catalog loops, skill retrieval (BM25)."""
