#!/usr/bin/env bash
# Convert a kimi.cpp `make-model` checkpoint to GGUF with llama.cpp's own
# converter (test/bench tooling only; the engine never uses this).
#
#   tools/llama_convert/convert.sh MODEL_DIR OUT.gguf [outtype] [extra converter args...]
#
# outtype: f32 | f16 | bf16 (default) | q8_0 | auto ...
# env: LLAMA_CPP_DIR (required: a llama.cpp checkout; docs/performance.md says how to get one)
#      PYTHON        (default /usr/bin/python3 - needs torch + numpy + yaml)
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 MODEL_DIR OUT.gguf [outtype] [extra convert_hf_to_gguf.py args...]" >&2
    exit 2
fi

MODEL_DIR=$1
OUT=$2
OUTTYPE=${3:-bf16}
shift $(( $# >= 3 ? 3 : 2 ))

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LLAMA_CPP_DIR=${LLAMA_CPP_DIR:?set LLAMA_CPP_DIR to a llama.cpp checkout (docs/performance.md, round three)}
PYTHON=${PYTHON:-/usr/bin/python3}

if [[ ! -f "$LLAMA_CPP_DIR/convert_hf_to_gguf.py" ]]; then
    echo "error: $LLAMA_CPP_DIR/convert_hf_to_gguf.py not found (set LLAMA_CPP_DIR)" >&2
    exit 1
fi
if [[ ! -f "$MODEL_DIR/config.json" ]]; then
    echo "error: $MODEL_DIR/config.json not found" >&2
    exit 1
fi

# the transformers stub goes first so a real transformers (if any) is never
# picked up; fallback/ (tqdm stand-in) goes last so a real tqdm wins.
# NO_LOCAL_GGUF: gguf-py is on PYTHONPATH already
export PYTHONPATH="$HERE:$LLAMA_CPP_DIR/gguf-py:$LLAMA_CPP_DIR${PYTHONPATH:+:$PYTHONPATH}:$HERE/fallback"
export NO_LOCAL_GGUF=1
# leave no __pycache__ in kimi.cpp or llama.cpp checkouts
export PYTHONDONTWRITEBYTECODE=1

exec "$PYTHON" "$HERE/convert.py" "$LLAMA_CPP_DIR" "$MODEL_DIR" \
    --outfile "$OUT" --outtype "$OUTTYPE" "$@"
