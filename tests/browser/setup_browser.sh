#!/bin/sh
# Test fixture of the browser tests: puppeteer-core (no browser download) into $1/node_modules,
# once, and Debian's chromium, which `make deps` installs. Without chromium the suite fails
# here with the reason, never silently skipped.
set -eu
DIR=$1
if ! command -v chromium >/dev/null 2>&1; then
  echo "browser tests: Debian's chromium is not installed (make deps installs it: apt-get install chromium)" >&2
  exit 1
fi
if [ ! -f "$DIR/node_modules/puppeteer-core/package.json" ]; then
  mkdir -p "$DIR"
  PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --prefix "$DIR" puppeteer-core@24.43.1
fi
DIR=$(cd "$DIR" && pwd)
node -e "console.log('puppeteer-core', require('$DIR/node_modules/puppeteer-core/package.json').version)"
chromium --version
