#!/usr/bin/env bash
# The main job on the embedded defaults: set up, evaluate the default model against the shipped
# gold set (report in evals/), then label the shipped unlabeled issues into out/labels.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
classify gold stats
classify eval --model embed-logreg
classify run --model embed-logreg --input data/issues.jsonl --out out/labels.jsonl --force
echo "labels: out/labels.jsonl; evaluation report: the newest folder in evals/"
