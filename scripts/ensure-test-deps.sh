#!/usr/bin/env bash
# Installs what the test suite needs outside Python: Debian's Chromium for the browser tests, and
# OpenSSH's client (sftp, ssh-keygen, ssh-keyscan) for the SFTP tests (tests/accounts/test_sftp.py).
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  echo "Installing Debian's chromium for the browser tests..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! command -v sftp >/dev/null 2>&1 || ! command -v ssh-keyscan >/dev/null 2>&1; then
  echo "Installing OpenSSH's client for the SFTP tests..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-client >/dev/null
fi
