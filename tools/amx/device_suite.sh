#!/bin/sh
# The AMX suite in one run, on a machine whose CPU has the tiles (docs/performance.md#amx):
# the instruction against the emulation, the tile plan on real tiles against its scalar order,
# every op and model test there, then the tile peak and the K3 shapes against the vector kernels
# in the same run. Reads the binaries packed by tools/amx/pack.sh from DIR; writes logs and JSON
# to $OUT (or out-amx/). Never fails on speed; exits non-zero if a test failed.
set -u
dir=${1:-device-amx}
out=${OUT:-out-amx}
mkdir -p "$out"
run() {   # the packed loader and libraries, whatever the machine has installed
    "$dir/lib/ld-linux-x86-64.so.2" --library-path "$dir/lib" "$@"
}
{
    grep -m1 'model name' /proc/cpuinfo
    grep -o 'amx_bf16\|amx_tile\|avx512_bf16' /proc/cpuinfo | sort | uniq -c
} > "$out/cpu.txt" 2>&1
cat "$out/cpu.txt"
fail=0
run "$dir/bin/amx_hw_tests" > "$out/amx_hw_tests.log" 2>&1 || fail=1
tail -3 "$out/amx_hw_tests.log"
run "$dir/bin/op_tests" --gtest_filter='*TileOrder*:AmxTile*' > "$out/tile_order.log" 2>&1 || fail=1
tail -3 "$out/tile_order.log"
run "$dir/bin/op_tests" > "$out/op_tests.log" 2>&1 || fail=1
tail -1 "$out/op_tests.log"
run "$dir/bin/model_tests" > "$out/model_tests.log" 2>&1 || fail=1
tail -1 "$out/model_tests.log"
t=${THREADS:-2}
run "$dir/bin/kimi-cpp" bench machine --threads "$t" --json "$out/machine.json" > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
for isa in amx avx512; do   # the tiles and the vector kernels on the same box, in one run
    KIMI_ISA=$isa run "$dir/bin/kimi-cpp" bench matmul --threads "$t" --reps 3 --working-set-mb 512 \
        --shapes 12288x7168,7168x3584,3072x7168 --tokens 1,16,64,512 --json "$out/matmul_$isa.json" \
        > "$out/matmul_$isa.txt" 2>&1
    cat "$out/matmul_$isa.txt"
done
exit $fail
