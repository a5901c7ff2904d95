from __future__ import annotations

import json
import stat

from tests.cli.conftest import no_traceback


def test_login_checks_the_token_and_saves_it_for_the_user_only(alice, argus_as, make_task):
    argus = argus_as(alice)
    task = make_task(alice)
    result = argus.run(
        "login", "--url", argus.url, "--token-stdin", input=argus.token + "\n", ARGUS_URL="", ARGUS_TOKEN=""
    )
    assert result.returncode == 0, result.stderr
    assert "as alice" in result.stderr
    path = argus.home / ".config" / "argus" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"url": argus.url, "token": argus.token}
    # Later commands need no environment.
    listed = argus.run("ls", ARGUS_URL="", ARGUS_TOKEN="")
    assert listed.returncode == 0 and task.task_id in listed.stdout


def test_login_with_a_wrong_token_saves_nothing(alice, argus_as):
    argus = argus_as(alice)
    result = argus.run(
        "login", "--url", argus.url, "--token-stdin", input="argus_wrong\n", ARGUS_URL="", ARGUS_TOKEN=""
    )
    assert result.returncode == 3 and "Invalid token." in result.stderr
    no_traceback(result)
    assert not (argus.home / ".config" / "argus" / "config.json").exists()
