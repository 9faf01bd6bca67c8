#!/usr/bin/env bash
# Set up with test tools and the local LLM server, then run the whole suite (slow tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
. .venv/bin/activate
python -m pytest -q tests "$@"
