#!/bin/sh
# Test fixture: installs the stock Node clients of the APIs the server speaks into
# $1/node_modules, once: OpenAI's (openai@5.23.2, no dependencies) and Anthropic's
# (@anthropic-ai/sdk@0.71.0, with json-schema-to-ts).
set -eu
DIR=$1
if [ ! -f "$DIR/node_modules/openai/package.json" ] || [ ! -f "$DIR/node_modules/@anthropic-ai/sdk/package.json" ]; then
  mkdir -p "$DIR"
  npm install --no-audit --no-fund --prefix "$DIR" openai@5.23.2 @anthropic-ai/sdk@0.71.0
fi
DIR=$(cd "$DIR" && pwd)
node -e "console.log('openai', require('$DIR/node_modules/openai/package.json').version)"
node -e "console.log('@anthropic-ai/sdk', require('$DIR/node_modules/@anthropic-ai/sdk/package.json').version)"
