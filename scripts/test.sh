#!/usr/bin/env bash
# Set up with test tools and the local LLM server, then lint (ruff), type-check (mypy) and run the
# whole suite (slow tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
. .venv/bin/activate
ruff check classify tests benchmarks
ruff format --check classify tests benchmarks
mypy
python -m pytest -q tests "$@"
