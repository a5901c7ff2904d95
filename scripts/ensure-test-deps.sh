#!/usr/bin/env bash
# Installs what the test suite needs outside Python: Debian's Chromium for the browser tests.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  echo "Installing Debian's chromium for the browser tests..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
