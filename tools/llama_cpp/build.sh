#!/bin/sh
# llama.cpp, built so that it runs on every machine this project sees: the GGUF test fixture
# (tests/gguf/CMakeLists.txt) and the side-by-side tables of `make bench` both build it here.
# Test and bench tooling only; the engine never needs it.
#
#   build.sh SRC OUT [TARGET...]
#
# SRC is the checkout fetch.sh cloned. Builds libllama (a release build, as llama.cpp ships), any
# extra ninja TARGETs (llama-bench, llama-quantize, ...), and against libllama our two drivers:
# llama_quant (tests/gguf/llama_quant.cpp: llama_model_quantize, the function llama-quantize runs,
# without llama.cpp's `common` library) and llama_logits (tests/gguf/llama_logits.cpp: the logits
# llama.cpp computes). Everything lands in OUT/bin; a second run with the same flags and the
# outputs in place does nothing. CPU only, no network.
#
# Portable, not native: GGML_NATIVE=OFF with each x86 extension that /proc/cpuinfo reports, and AMX
# off. With -march=native on a Xeon with AMX, ggml-cpu compiles its AMX buffer type, which at
# de3ff81 aborts with GGML_ASSERT(*cur_backend_id != -1) while scheduling a Kimi graph with Q8_0
# weights (docs/gguf.md, "Known limitations of llama.cpp"). Elsewhere than x86-64 the native build
# is used (no AMX there).
set -eu
SRC=$(cd "$1" && pwd)
mkdir -p "$2"
OUT=$(cd "$2" && pwd)   # absolute: the drivers' rpath names it
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
DRIVERS=$(cd "$HERE/../../tests/gguf" && pwd)
BIN=$OUT/bin

# The ggml CPU options: one per extension this CPU has, in ggml's names.
cpu_flags() {
  flags=$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2)
  has() { for f in "$@"; do case " $flags " in *" $f "*) ;; *) return 1 ;; esac; done; }
  on() { if has "$@"; then echo ON; else echo OFF; fi; }
  echo "-DGGML_NATIVE=OFF -DGGML_SSE42=$(on sse4_2) -DGGML_F16C=$(on f16c) -DGGML_FMA=$(on fma)" \
    "-DGGML_BMI2=$(on bmi2) -DGGML_AVX=$(on avx) -DGGML_AVX2=$(on avx2) -DGGML_AVX_VNNI=$(on avx_vnni)" \
    "-DGGML_AVX512=$(on avx512f avx512cd avx512vl avx512dq avx512bw)" \
    "-DGGML_AVX512_VBMI=$(on avx512vbmi) -DGGML_AVX512_VNNI=$(on avx512_vnni)" \
    "-DGGML_AVX512_BF16=$(on avx512_bf16) -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
}
if [ "$(uname -m)" = x86_64 ]; then ISA=$(cpu_flags); else ISA="-DGGML_NATIVE=ON"; fi
STAMP=$ISA

built() {
  [ -f "$OUT/build.flags" ] && [ "$(cat "$OUT/build.flags")" = "$STAMP" ] || return 1
  for tool in llama_quant llama_logits; do
    [ -x "$BIN/$tool" ] && [ "$BIN/$tool" -nt "$DRIVERS/$tool.cpp" ] || return 1
  done
  for target in "$@"; do [ -x "$BIN/$target" ] || return 1; done
}
if built "$@"; then
  echo "llama.cpp tools already built in $BIN ($ISA)"
  exit 0
fi
start=$(date +%s)
# shellcheck disable=SC2086  # $ISA is a list of -D options
cmake -S "$SRC" -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release $ISA -DGGML_OPENMP=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
# What ggml-cpu was configured with, as its CMake prints it: the proof that AMX is off.
variant=$(grep 'Adding CPU backend variant' "$OUT/configure.log" || true)
echo "llama.cpp configure: $ISA"
echo "  ggml-cpu: ${variant#*-- }"
case "$variant" in
  *[Aa][Mm][Xx]*) echo "error: ggml-cpu was configured with AMX (see $OUT/configure.log)" >&2; exit 1 ;;
esac
echo "  AMX off (GGML_AMX_TILE/INT8/BF16=OFF, no -march=native)"
ninja -C "$OUT" llama "$@" >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
for tool in llama_quant llama_logits; do
  c++ -std=c++17 -O2 -I "$SRC/include" -I "$SRC/ggml/include" "$DRIVERS/$tool.cpp" -L "$BIN" -lllama -lggml \
    -lggml-base -Wl,-rpath,"$BIN" -o "$BIN/$tool"
done
echo "$STAMP" >"$OUT/build.flags"
echo "llama.cpp $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?'): libllama, llama_quant," \
  "llama_logits${*:+, $*} built in $BIN in $(($(date +%s) - start)) s"
