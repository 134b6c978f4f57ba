#!/usr/bin/env bash
# The commands that made (and resume) every log in sample_runs/, from the repository root.
# Each step appends to its log and skips what is already there, so re-running this script resumes.
# Needs the local models: ../shared/tools/local-llm start qwen; ../shared/tools/local-llm start smollm 8766
# Run one model at a time on a 2-core machine: two llama servers computing at once slow both a lot.
set -uo pipefail
cd "$(dirname "$0")/.."
SA=${SA:-.venv/bin/skillaudit}
DATA=${DATA:-../shared/data}  # the benchmark files, passed explicitly (skillaudit never looks in ../shared)
Q="--skills skills --endpoint http://127.0.0.1:8765/v1 --model qwen2.5-coder-0.5b-instruct --seed 0 \
   --temperature 0.7 --tool-mode chatml --tool-choice required --max-calls 1 --max-tokens 384 --quiet"
S="--skills skills --endpoint http://127.0.0.1:8766/v1 --model smollm2-135m-instruct --seed 0 \
   --temperature 0.7 --tool-mode chatml --tool-choice required --max-calls 1 --max-tokens 384 --quiet"
QM=sample_runs/qwen2.5-coder-0.5b
SM=sample_runs/smollm2-135m
step() { local s; s=$(date +%s); "$SA" run "$@"; echo "$* -> rc=$? in $(( $(date +%s) - s )) s" >&2; }

# main pairs (enabled + disabled), 80 tasks each drawn with --seed 0
step --benchmark mbpp_plus --data $DATA/mbpp_plus.jsonl --limit 80 --out ${QM}_mbpp_plus.jsonl $Q
step --benchmark gsm8k     --data $DATA/gsm8k_test.jsonl --limit 80 --out ${QM}_gsm8k.jsonl $Q
# verify: the 3 skills with the lowest relative effect on MBPP+ (prune recommends none), re-run without them
step --benchmark mbpp_plus --data $DATA/mbpp_plus.jsonl --arms pruned --prune empty-input-edge-cases,series-sum-loops,percent-change \
     --base ${QM}_mbpp_plus.jsonl --out ${QM}_mbpp_plus.verify.jsonl $Q
# control arms (task-major: a stopped run holds every arm for the same tasks) and masks
step --benchmark mbpp_plus --data $DATA/mbpp_plus.jsonl --arms empty,replicate,random,filler --base ${QM}_mbpp_plus.jsonl --out ${QM}_mbpp_plus.arms.jsonl $Q
step --benchmark mbpp_plus --data $DATA/mbpp_plus.jsonl --arms mask:4 --base ${QM}_mbpp_plus.jsonl --out ${QM}_mbpp_plus.masks.jsonl $Q
step --benchmark gsm8k     --data $DATA/gsm8k_test.jsonl --arms empty,replicate,random,filler --base ${QM}_gsm8k.jsonl --out ${QM}_gsm8k.arms.jsonl $Q
# second model: main pairs, then random and filler arms
step --benchmark mbpp_plus --data $DATA/mbpp_plus.jsonl --limit 80 --out ${SM}_mbpp_plus.jsonl $S
step --benchmark gsm8k     --data $DATA/gsm8k_test.jsonl --limit 80 --out ${SM}_gsm8k.jsonl $S
step --benchmark mbpp_plus --data $DATA/mbpp_plus.jsonl --arms random,filler --base ${SM}_mbpp_plus.jsonl --out ${SM}_mbpp_plus.arms.jsonl $S
step --benchmark gsm8k     --data $DATA/gsm8k_test.jsonl --arms random,filler --base ${SM}_gsm8k.jsonl --out ${SM}_gsm8k.arms.jsonl $S
# SmolLM2's A/A noise floor (issue 51): the replicate arm, a second run without skills per pair
step --benchmark mbpp_plus --data $DATA/mbpp_plus.jsonl --arms replicate --base ${SM}_mbpp_plus.jsonl --out ${SM}_mbpp_plus.arms.jsonl $S
step --benchmark gsm8k     --data $DATA/gsm8k_test.jsonl --arms replicate --base ${SM}_gsm8k.jsonl --out ${SM}_gsm8k.arms.jsonl $S
