#!/usr/bin/env bash
# Install clawrecall into ./.venv. With --dev, also the test tools.
#
# PyTorch is installed first, pinned to a CPU build: a bare `torch` requirement on Linux
# pulls a CUDA build of several GB. Set CLAWRECALL_TORCH to choose another spec
# (e.g. CLAWRECALL_TORCH="torch" on macOS, where every build is the CPU one).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
extras=""
[ "${1:-}" = "--dev" ] && extras="[dev]"

[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/python -m pip install --quiet "${CLAWRECALL_TORCH:-torch==2.13.0}"
fi
.venv/bin/python -m pip install --quiet -e ".${extras}"
echo "clawrecall installed in $(pwd)/.venv ($(.venv/bin/clawrecall --version))" >&2
