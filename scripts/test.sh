#!/usr/bin/env bash
# The README's test command; passes on a fresh Debian/Ubuntu machine by itself:
#   1. the browser tests' headless Chromium and chromedriver (apt; skipped with CLASSIFY_SKIP_BROWSER=1),
#   2. .venv with test tools and the local LLM server (scripts/setup.sh --dev),
#   3. lint (ruff), type-check (mypy) and the whole suite (slow tests included).
# Arguments go to pytest (e.g. `bash scripts/test.sh -x -k run`). Prints its own time at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
pytest_s=""
report() {
    local rc=$?
    echo "test.sh: $([ $rc -eq 0 ] && echo passed || echo "failed (exit $rc)") in $((SECONDS - start)) s${pytest_s:+, pytest $pytest_s s}" >&2
}
trap report EXIT

# The workbench's and the report's browser tests drive Debian's headless Chromium; they fail (not skip)
# without it. (The two paths can be overridden, for the test of this script.)
CHROMIUM=${CLASSIFY_CHROMIUM:-/usr/bin/chromium} CHROMEDRIVER=${CLASSIFY_CHROMEDRIVER:-/usr/bin/chromedriver}
if [ "${CLASSIFY_SKIP_BROWSER:-}" != "1" ] && { [ ! -x "$CHROMIUM" ] || [ ! -x "$CHROMEDRIVER" ]; }; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "test.sh: installing chromium and chromium-driver (apt) for the browser tests" >&2
    $SUDO apt-get update
    $SUDO apt-get install -y chromium chromium-driver
fi
bash scripts/setup.sh --dev
. .venv/bin/activate
ruff check classify tests benchmarks
ruff format --check classify tests benchmarks
mypy
t0=$SECONDS
set +e
python -m pytest -q tests "$@"
rc=$?
set -e
pytest_s=$((SECONDS - t0))
exit $rc
