"""Production settings: what happens when ARGUS_DEBUG is off, checked in fresh interpreters."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.renamed_settings import RENAMED

ROOT = Path(__file__).resolve().parents[2]


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


CHECKS = (
    "import django; django.setup(); from django.conf import settings as s; "
    "from django.core.checks import run_checks; "
    "print(repr({value})); print([(m.id, m.msg, m.hint) for m in run_checks() if m.id == 'accounts.W001'])"
)


def _read(value: str, **env: str) -> tuple[object, list[tuple[str, str, str]]]:
    result = _settings(CHECKS.format(value=value), ARGUS_DEBUG="1", DJANGO_SETTINGS_MODULE="argus_site.settings", **env)
    assert result.returncode == 0, result.stderr
    value_line, warnings_line = result.stdout.strip().splitlines()[-2:]
    return ast.literal_eval(value_line), ast.literal_eval(warnings_line)


@pytest.mark.parametrize(
    ("old", "given", "value", "seconds"),
    [
        ("ARGUS_DB_CONN_MAX_AGE", "60", "s.DATABASES['default']['CONN_MAX_AGE']", 60),
        ("ARGUS_HSTS_SECONDS", "3600", "s.SECURE_HSTS_SECONDS", 3600),
        ("ARGUS_FAIR_SHARE_HALF_LIFE_H", "1.5", "s.ARGUS_FAIR_SHARE_HALF_LIFE_S", 5400),
        ("ARGUS_FAIR_SHARE_WINDOW", "90m", "s.ARGUS_FAIR_SHARE_WINDOW_S", 5400),
        ("ARGUS_DEFAULT_TIME_LIMIT", "12h", "s.ARGUS_DEFAULT_TIME_LIMIT_S", 43200),
        ("ARGUS_MAX_TIME_LIMIT", "7200", "s.ARGUS_MAX_TIME_LIMIT_S", 7200),
        ("ARGUS_STALL_TIMEOUT", "10m", "s.ARGUS_STALL_TIMEOUT_S", 600),
        ("ARGUS_WEBHOOK_KEEP_DAYS", "7", "s.ARGUS_WEBHOOK_KEEP_S", 7 * 86400),
    ],
)
def test_an_old_duration_name_is_still_read_in_seconds_and_warns_with_the_new_one(old, given, value, seconds):
    new = RENAMED[old][0]
    assert _read(value, ARGUS_SECURE_TLS="1", **{old: given}) == (
        seconds,
        [
            (
                "accounts.W001",
                f"{old} is an old name: it was read as {new}, in seconds.",
                f"Set {new} instead (docs/configuration.md, 'Renamed settings').",
            )
        ],
    )


def test_the_new_duration_names_are_read_and_win_over_the_old_without_a_warning():
    value = "(s.ARGUS_STALL_TIMEOUT_S, s.ARGUS_FAIR_SHARE_HALF_LIFE_S, s.ARGUS_WEBHOOK_KEEP_S, s.SECURE_HSTS_SECONDS)"
    env = {
        "ARGUS_SECURE_TLS": "1",
        "ARGUS_STALL_TIMEOUT_S": "120",
        "ARGUS_STALL_TIMEOUT": "10m",
        "ARGUS_FAIR_SHARE_HALF_LIFE_S": "2h",
        "ARGUS_WEBHOOK_KEEP_S": "3600",
        "ARGUS_HSTS_S": "1d",
    }
    assert _read(value, **env) == ((120, 7200, 3600, 86400), [])


def test_the_defaults_are_unchanged_by_the_renames():
    names = [
        "ARGUS_STALL_TIMEOUT_S",
        "ARGUS_FAIR_SHARE_HALF_LIFE_S",
        "ARGUS_FAIR_SHARE_WINDOW_S",
        "ARGUS_WEBHOOK_KEEP_S",
    ]
    value = "(" + ", ".join(f"s.{name}" for name in names) + ")"
    assert _read(value) == ((1800, 168 * 3600, 7200, 30 * 86400), [])


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ARGUS_STALL_TIMEOUT_S": "soon"}, "ARGUS_STALL_TIMEOUT_S='soon': expected seconds"),
        ({"ARGUS_WEBHOOK_KEEP_DAYS": "a week"}, "ARGUS_WEBHOOK_KEEP_DAYS='a week': expected a number of days"),
        ({"ARGUS_FAIR_SHARE_HALF_LIFE_H": "-1"}, "ARGUS_FAIR_SHARE_HALF_LIFE_H='-1': expected a number of hours"),
    ],
)
def test_a_duration_that_is_not_one_stops_the_start_naming_the_variable(env, message):
    result = _settings("print('loaded')", ARGUS_DEBUG="1", **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


def test_every_duration_setting_is_named_in_seconds():
    """A duration (read by envseconds) is a setting named *_S, read from a variable named *_S:
    the one convention, which the renames above brought every old name to."""
    tree = ast.parse((ROOT / "argus_site" / "settings.py").read_text())
    durations = [
        (target.id, str(node.value.args[0].value))
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "id", None) == "envseconds"
        for target in node.targets
        if isinstance(target, ast.Name) and isinstance(node.value.args[0], ast.Constant)
    ]
    assert len(durations) >= 6, durations  # the scan finds them
    # Django's own names (SECURE_HSTS_SECONDS) are Django's to choose.
    wrong = [(name, variable) for name, variable in durations if name.startswith("ARGUS_") and not name.endswith("_S")]
    assert wrong == []
    assert [variable for _, variable in durations if not variable.endswith("_S")] == []
