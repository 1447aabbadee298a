#!/bin/sh
# Test fixture of the GGUF accuracy test: builds, once, from the llama.cpp sources that
# setup_llama_cpp.sh cloned ($1), its llama-quantize (to make the quantized test files) and
# libllama, and against that library our llama_logits (tests/gguf/llama_logits.cpp: the
# logits llama.cpp computes, for the comparison). Everything lands in $2/bin; a second run
# with the outputs in place does nothing. CPU only, no network.
set -eu
SRC=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$OUT/bin
if [ -x "$BIN/llama-quantize" ] && [ -x "$BIN/llama_logits" ] && [ "$BIN/llama_logits" -nt "$HERE/llama_logits.cpp" ]; then
  echo "llama.cpp tools already built in $BIN"
  exit 0
fi
mkdir -p "$OUT"
start=$(date +%s)
cmake -S "$SRC" -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
ninja -C "$OUT" llama-quantize llama >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
c++ -std=c++17 -O2 -I "$SRC/include" -I "$SRC/ggml/include" "$HERE/llama_logits.cpp" -L "$BIN" -lllama -lggml \
  -lggml-base -Wl,-rpath,"$BIN" -o "$BIN/llama_logits"
echo "llama.cpp $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?'): llama-quantize, libllama and" \
  "llama_logits built in $BIN in $(( $(date +%s) - start )) s"
