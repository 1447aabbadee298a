#!/bin/sh
# Tokenizer throughput, single thread, kimi-cpp vs npm tiktoken (same corpus, same run):
# English prose (the GPL-3 text, repeated to ~1 MB) and, if present, Chinese text (vim's
# Chinese tutor, repeated to ~1 MB), on the Kimi-layout o200k tokenizer of the oracle fixture.
#   bench.sh KIMI_CPP BUILD_DIR
set -eu
KIMI=$1; BUILD_DIR=$2
OUT="$BUILD_DIR/tokenizer-test"
mk() {   # mk SRC DST: SRC repeated to at least 1 MB
  : > "$2"
  while [ "$(wc -c < "$2")" -lt 1000000 ]; do cat "$1" >> "$2"; done
}
mk /usr/share/common-licenses/GPL-3 "$OUT/bench-en.txt"
"$KIMI" bench tokenizer --tokenizer "$OUT/o200k-kimi" --input "$OUT/bench-en.txt" --compare-tiktoken \
  --node-modules "$BUILD_DIR/npm-oracle/node_modules"
ZH=$(ls /usr/share/vim/vim*/tutor/tutor.zh_cn.utf-8 2>/dev/null | head -n 1 || true)
if [ -n "$ZH" ]; then
  mk "$ZH" "$OUT/bench-zh.txt"
  "$KIMI" bench tokenizer --tokenizer "$OUT/o200k-kimi" --input "$OUT/bench-zh.txt" --compare-tiktoken \
    --node-modules "$BUILD_DIR/npm-oracle/node_modules"
else
  echo "no Chinese text found (vim tutor); skipped the CJK run"
fi
