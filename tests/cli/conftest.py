"""The installed `argus` command, run as a user runs it, against a live test server."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
from django.contrib.auth.models import User

from accounts.models import ApiToken
from devkit.wait import wait_for

# .venv/bin/argus: `make venv` installs ./cli into the project's venv.
ARGUS = Path(sys.executable).parent / "argus"


@dataclass
class Argus:
    """Runs `argus` as ``user`` (a token of theirs in ARGUS_TOKEN) against the live server."""

    url: str
    token: str
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith(("ARGUS_", "DJANGO_"))}
        # A config folder of the test's own, and no terminal tricks: plain, wide output.
        env.update(HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"), COLUMNS="200", NO_COLOR="1")
        env.update(ARGUS_URL=self.url, ARGUS_TOKEN=self.token)
        env.update(extra)
        return {key: value for key, value in env.items() if value != ""}

    def run(self, *args: str, input: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ARGUS), *args], input=input, capture_output=True, text=True, env=self.env(**env), timeout=60
        )

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(ARGUS), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env(**env)
        )


def read_until(stream: IO[str] | None, text: str, timeout: float = 30.0) -> str:
    """What a started command has written to ``stream`` (its stdout or stderr) up to ``text``: the
    test goes on once the command has shown it got that far. Read from the pipe itself, not
    through the file object's buffer, so that ``communicate()`` later gets all the rest."""
    assert stream is not None
    fd, seen = stream.fileno(), b""

    def arrived() -> bool:
        nonlocal seen
        if select.select([fd], [], [], 0)[0]:
            seen += os.read(fd, 65536)
        return text.encode() in seen

    wait_for(arrived, f"{text!r} from the command", timeout=timeout, interval=0.02)
    return seen.decode("utf-8", "replace")  # a character cut at the end of a read is not what tests look at


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


@pytest.fixture
def argus_as(live_server, transactional_db, tmp_path: Path) -> Callable[[User], Argus]:
    assert ARGUS.exists(), f"{ARGUS} is missing: run `make venv` (it installs ./cli)"

    def make(user: User) -> Argus:
        _, raw = ApiToken.issue(user, "cli")
        home = tmp_path / f"home-{user.username}"
        home.mkdir(exist_ok=True)
        return Argus(url=live_server.url, token=raw, home=home)

    return make
