#!/bin/sh
# One exactness test: a corpus through npm tiktoken (oracle.mjs) and through
# `kimi-cpp tokenize --input-jsonl`, then every line compared (compare.mjs).
#   run_oracle.sh KIMI_CPP BUILD_DIR TOKENIZER CORPUS PATTERN SPECIAL
# TOKENIZER: o200k-kimi (o200k ranks + Kimi specials) or pieces (ranks = pre-tokens).
set -eu
KIMI=$1; BUILD_DIR=$2; TOK=$3; CORPUS=$4; PATTERN=$5; SPECIAL=$6
HERE=$(cd "$(dirname "$0")" && pwd)
OUT="$BUILD_DIR/tokenizer-test"
NAME="$TOK.$CORPUS.$PATTERN.$SPECIAL"
node "$HERE/oracle.mjs" "$BUILD_DIR/npm-oracle/node_modules" "$OUT/$TOK" "$OUT/$CORPUS.jsonl" "$OUT/expected.$NAME.jsonl" "$PATTERN" "$SPECIAL"
"$KIMI" tokenize --tokenizer "$OUT/$TOK" --input-jsonl "$OUT/$CORPUS.jsonl" --pattern "$PATTERN" --special "$SPECIAL" > "$OUT/actual.$NAME.jsonl"
node "$HERE/compare.mjs" "$OUT/$CORPUS.jsonl" "$OUT/expected.$NAME.jsonl" "$OUT/actual.$NAME.jsonl"
