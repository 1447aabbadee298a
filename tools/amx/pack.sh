#!/bin/sh
# Packs what the AMX check needs onto a machine that may lack this one's packages (the device
# machine of docs/performance.md#amx): the Release binaries and every shared library they load,
# the C library and its loader included, into DIR (default device-amx/, ignored by git there).
# Then: the device tool's `run` with carry [DIR] and command `sh tools/amx/device_suite.sh DIR`.
set -eu
build=${BUILD:-build}
dir=${1:-device-amx}
case $dir in /* | *..*) echo "pack.sh: DIR must be a folder inside the repository: $dir" >&2; exit 2 ;; esac
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib"
for b in kimi-cpp op_tests model_tests amx_hw_tests; do
    cp "$build/bin/$b" "$dir/bin/"
    ldd "$build/bin/$b" | awk '/=>/ {print $3} !/=>/ && $1 ~ /^\// {print $1}' | while read -r lib; do
        [ -f "$lib" ] && cp -L "$lib" "$dir/lib/"
    done
done
grep -qx "/$dir/" .git/info/exclude 2>/dev/null || echo "/$dir/" >> .git/info/exclude
du -sh "$dir"
