#!/bin/sh
# Test fixture for the tokenizer exactness tests: installs the npm `tiktoken` oracle into
# $BUILD_DIR/npm-oracle (only if it is not there yet), builds the Kimi-layout o200k tokenizer
# directory from the ranks it ships, generates the test corpus and the code-point sweep, and
# the "pieces" tokenizer whose ranks are the corpora's pre-tokens (tokenizer_tool pieces-vocab).
#   setup_oracle.sh BUILD_DIR TOKENIZER_TOOL
set -eu
BUILD_DIR=$1; TOOL=$2
HERE=$(cd "$(dirname "$0")" && pwd)
ORACLE="$BUILD_DIR/npm-oracle"
OUT="$BUILD_DIR/tokenizer-test"
if [ ! -f "$ORACLE/node_modules/tiktoken/package.json" ]; then
  mkdir -p "$ORACLE"
  npm install --no-audit --no-fund --prefix "$ORACLE" tiktoken@1.0.22
fi
mkdir -p "$OUT"
node "$HERE/make_oracle_dir.mjs" "$ORACLE/node_modules" "$OUT/o200k-kimi"
node "$HERE/gen_corpus.mjs" "$OUT/corpus.jsonl" 1
node "$HERE/gen_sweep.mjs" "$OUT/sweep.jsonl"
"$TOOL" pieces-vocab "$OUT/pieces" "$OUT/corpus.jsonl" "$OUT/sweep.jsonl"
