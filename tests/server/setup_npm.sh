#!/bin/sh
# Test fixture: installs the stock OpenAI Node client (openai@5.23.2, no dependencies) into
# $1/node_modules, once.
set -eu
DIR=$1
if [ ! -f "$DIR/node_modules/openai/package.json" ]; then
  mkdir -p "$DIR"
  npm install --no-audit --no-fund --prefix "$DIR" openai@5.23.2
fi
DIR=$(cd "$DIR" && pwd)
node -e "console.log('openai', require('$DIR/node_modules/openai/package.json').version)"
