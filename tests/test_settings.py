"""Production settings: what happens when ARGUS_DEBUG is off, checked in fresh interpreters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _settings(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ARGUS_")}
    return subprocess.run(
        [sys.executable, "-c", f"import argus_site.settings as s; {code}"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_secret_is_required_when_debug_is_off():
    result = _settings("print('loaded')")
    assert result.returncode != 0
    assert "ARGUS_SECRET_KEY is required when ARGUS_DEBUG is off" in result.stderr


def test_debug_is_off_by_default_and_cookies_are_secure_behind_tls():
    result = _settings(
        "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_PROXY_SSL_HEADER)",
        ARGUS_SECRET_KEY="k",
        ARGUS_SECURE_TLS="1",
    )
    assert result.stdout.split() == ["False", "True", "True", "('HTTP_X_FORWARDED_PROTO',", "'https')"]


def test_importing_the_settings_touches_no_database():
    result = _settings(
        "import django; django.setup(); print('ok')",
        ARGUS_SECRET_KEY="k",
        DATABASE_URL="postgres://nobody@nowhere.invalid:1/none",
        DJANGO_SETTINGS_MODULE="argus_site.settings",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
