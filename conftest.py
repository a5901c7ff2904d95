"""Loaded before Django is set up: the environment every test run starts from."""

from __future__ import annotations

import os

os.environ.setdefault("ARGUS_SECRET_KEY", "argus-test-secret-key")
