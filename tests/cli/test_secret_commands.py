from __future__ import annotations

import json

from accounts.models import Secret
from tasks.attempts import Attempt
from tests.cli.conftest import no_traceback
from tests.conftest import PPO_SPEC

VALUE = "cli-secret-value-0123456789"


def test_set_from_stdin_list_and_remove(alice, bob, argus_as):
    argus = argus_as(alice)
    saved = argus.run("secret", "set", "WANDB_API_KEY", input=VALUE + "\n")
    assert saved.returncode == 0, saved.stderr
    assert "Secret WANDB_API_KEY saved" in saved.stderr and VALUE not in saved.stdout + saved.stderr
    assert Secret.objects.values_for(alice, ["WANDB_API_KEY"]) == {"WANDB_API_KEY": VALUE}  # no newline kept

    listed = argus.run("secret", "ls")
    assert "WANDB_API_KEY" in listed.stdout and VALUE not in listed.stdout
    rows = json.loads(argus.run("secret", "ls", "--json").stdout)
    assert [set(row) for row in rows] == [{"name", "created_at", "updated_at"}]
    assert argus_as(bob).run("secret", "ls").stdout.count("WANDB_API_KEY") == 0

    assert argus_as(bob).run("secret", "rm", "WANDB_API_KEY").returncode == 3
    removed = argus.run("secret", "rm", "WANDB_API_KEY")
    assert removed.returncode == 0 and not Secret.objects.exists()


def test_a_refused_name_or_value_says_why(alice, argus_as):
    argus = argus_as(alice)
    bad_name = argus.run("secret", "set", "lower_case", input=VALUE)
    assert bad_name.returncode == 3 and "name:" in bad_name.stderr and "is not a secret name" in bad_name.stderr
    no_traceback(bad_name)
    bad_value = argus.run("secret", "set", "A_KEY", input="two\nlines\n")
    assert bad_value.returncode == 3 and "must be printable" in bad_value.stderr
    assert not Secret.objects.exists()


def test_argus_logs_shows_the_tasks_secrets_redacted(alice, argus_as, make_task, tmp_path):
    Secret.put(alice, "HF_TOKEN", VALUE)
    task = make_task(alice, PPO_SPEC + "secrets: [HF_TOKEN]\n")
    log = tmp_path / "driver.log"
    log.write_text(f"token {VALUE}\nstep:1 - x:1\n")
    Attempt.objects.create(task=task, attempt_no=1, ray_submission_id=f"{task.task_id}--a01", log_path=str(log))
    argus = argus_as(alice)
    for args in ((), ("--tail", "5")):
        shown = argus.run("logs", task.task_id, *args)
        assert shown.stdout == "token [redacted]\nstep:1 - x:1\n", shown.stderr
