"""What goes wrong is said in words, with a non-zero exit, and never as a traceback."""

from __future__ import annotations

import socket
import subprocess

import pytest

from accounts.models import ApiToken
from tests.cli.conftest import ARGUS, no_traceback


def test_a_wrong_token_says_so(alice, argus_as):
    result = argus_as(alice).run("ls", ARGUS_TOKEN="argus_not-a-real-token")
    assert result.returncode == 3
    no_traceback(result)
    assert "error: Invalid token." in result.stderr, result.stderr
    assert "argus login" in result.stderr


def test_a_revoked_token_says_so(alice, argus_as):
    argus = argus_as(alice)
    ApiToken.objects.get(user=alice).revoke()
    result = argus.run("queue")
    assert result.returncode == 3 and "revoked" in result.stderr, result.stderr
    no_traceback(result)


def test_the_server_down_says_so(alice, argus_as):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # free, and nothing listens once closed
    result = argus_as(alice).run("ls", ARGUS_URL=f"http://127.0.0.1:{port}")
    assert result.returncode == 3
    no_traceback(result)
    assert f"Cannot reach Argus at http://127.0.0.1:{port}" in result.stderr


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not-a-url", "Cannot reach Argus at not-a-url"),
        ("http://host:port", "http://host:port is not a URL"),
        ("{live}/elsewhere", "HTTP 404 from {live}/elsewhere/api/v2/tasks"),
    ],
)
def test_a_wrong_url_says_so(url, message, alice, argus_as):
    argus = argus_as(alice)
    result = argus.run("ls", ARGUS_URL=url.format(live=argus.url))
    assert result.returncode == 3
    no_traceback(result)
    assert message.format(live=argus.url) in result.stderr, result.stderr


def test_no_configuration_says_what_to_do(alice, argus_as):
    result = argus_as(alice).run("cluster", ARGUS_URL="", ARGUS_TOKEN="")
    assert result.returncode == 3
    assert "No Argus URL: set ARGUS_URL or run `argus login`." in result.stderr


def test_a_missing_file_is_a_usage_error(alice, argus_as):
    result = argus_as(alice).run("submit", "/nonexistent/spec.yaml")
    assert result.returncode == 2 and "No such file or directory" in result.stderr
    no_traceback(result)


@pytest.mark.parametrize(
    "command",
    [
        *["submit", "ls", "show", "logs", "cancel", "wait", "resubmit", "queue", "cluster", "login"],
        *["webhook add", "webhook ls", "webhook rm", "webhook deliveries"],
    ],
)
def test_every_command_has_help(command):
    result = subprocess.run([str(ARGUS), *command.split(), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("Usage: argus " + command), result.stderr
