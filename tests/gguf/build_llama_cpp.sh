#!/bin/sh
# Test fixture of the GGUF accuracy test: builds, once, from the llama.cpp sources that
# setup_llama_cpp.sh cloned ($1), libllama (a release build, as llama.cpp ships), and against it
# our two drivers: llama_quant (tests/gguf/llama_quant.cpp: llama.cpp's quantizer,
# llama_model_quantize, the function its llama-quantize runs, which gives the same tensors
# without building llama.cpp's `common` library) and llama_logits (the logits llama.cpp
# computes). Everything lands in $2/bin; a second run with the outputs in place does nothing.
# CPU only, no network.
set -eu
SRC=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$OUT/bin
if [ -x "$BIN/llama_quant" ] && [ -x "$BIN/llama_logits" ] && [ "$BIN/llama_logits" -nt "$HERE/llama_logits.cpp" ] &&
   [ "$BIN/llama_quant" -nt "$HERE/llama_quant.cpp" ]; then
  echo "llama.cpp tools already built in $BIN"
  exit 0
fi
mkdir -p "$OUT"
start=$(date +%s)
cmake -S "$SRC" -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
ninja -C "$OUT" llama >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
for tool in llama_quant llama_logits; do
  c++ -std=c++17 -O2 -I "$SRC/include" -I "$SRC/ggml/include" "$HERE/$tool.cpp" -L "$BIN" -lllama -lggml \
    -lggml-base -Wl,-rpath,"$BIN" -o "$BIN/$tool"
done
echo "llama.cpp $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?'): libllama, llama_quant and" \
  "llama_logits built in $BIN in $(( $(date +%s) - start )) s"
