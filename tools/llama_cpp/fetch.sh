#!/bin/sh
# llama.cpp's sources, as bundled in the npm package node-llama-cpp (a git bundle), cloned once
# into $1/llama.cpp: the fixture of the GGUF tests and the peer of `make bench`'s side-by-side
# table. The tests use its gguf-py package (the numpy dequantizers, the GGUF writer and reader)
# and its own converter (convert_hf_to_gguf.py, through tools/llama_convert). Nothing is built
# here: build.sh beside this file builds it portably.
set -eu
DIR=$1
VERSION=3.22.1
if [ ! -f "$DIR/llama.cpp/gguf-py/gguf/__init__.py" ]; then
  mkdir -p "$DIR"
  tmp=$(mktemp -d "$DIR/fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-llama-cpp@$VERSION" >/dev/null)
  tar -xzf "$tmp"/node-llama-cpp-*.tgz -C "$tmp" package/llama/gitRelease.bundle
  rm -rf "$DIR/llama.cpp"
  git clone --quiet "$tmp/package/llama/gitRelease.bundle" "$DIR/llama.cpp"
fi
cd "$DIR/llama.cpp"
echo "llama.cpp $(git rev-parse --short HEAD 2>/dev/null || echo '?') (node-llama-cpp $VERSION) in $(pwd)"
/usr/bin/python3 -c "import numpy; print('numpy', numpy.__version__)"
