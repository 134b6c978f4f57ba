"""The paired-run harness behind `skillaudit run` (DESIGN §1, §3.1).

Every task runs twice with the same prompt and seed: once with the `search_skills` tool offered
(skills enabled) and once without it (skills disabled). Modules:

- `tasks`: benchmark loaders (MBPP+, HumanEval, GSM8K, MATH-500) and seeded sampling;
- `score`: sandboxed code execution and math answer checking;
- `retrieve`: BM25 `search_skills` over a skill library;
- `agent`: the chat loop against an OpenAI-compatible endpoint;
- `runner`: both conditions, epochs, concurrency, resume, append-only JSON Lines.

Optional dependencies (`pip install 'skillaudit[harness]'`) are imported lazily.
"""
