#!/bin/sh
# Regenerate the SkillsBench sample logs from the published files in ../shared/data/real (read-only;
# origin: benchflow-ai/skillsbench-trajectories and benchflow-ai/skillsbench-leaderboard, see its README).
# Run from the repository root.
set -e
REAL=../shared/data/real
skillaudit import skillsbench "$REAL/skillsbench-results-registry.json" -o sample_runs/skillsbench/registry.jsonl -q
skillaudit import harbor "$REAL/harbor/claude-code/main-with-skills-pass2" \
    "$REAL/harbor/claude-code/main-without-skills-pass2" -o sample_runs/skillsbench/claude-code-harbor.jsonl -q
gzip -n -9 -f sample_runs/skillsbench/registry.jsonl sample_runs/skillsbench/claude-code-harbor.jsonl
