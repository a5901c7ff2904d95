"""`argus logs` (whole, tail, -f: the follow `submit --follow` makes too) print a log as the server serves it:
no piece of a secret's value, wherever the log holds it (tests/tasks/logs/test_log_redaction.py)."""

from __future__ import annotations

from pathlib import Path

from django.utils import timezone

from accounts.models import Secret
from tasks.attempts import Attempt
from tasks.choices import Role, TaskState
from tests.cli.conftest import no_traceback
from tests.conftest import PPO_SPEC
from tests.tasks.logs.test_log_redaction import PLANTED, VALUE, leaks

S = TaskState


def test_argus_logs_in_every_mode_prints_no_piece_of_a_value(alice, argus_as, make_task, tmp_path: Path) -> None:
    Secret.put(alice, "HF_TOKEN", VALUE)
    task = make_task(alice, PPO_SPEC + "secrets: [HF_TOKEN]\n")
    log = tmp_path / "driver.log"
    log.write_bytes(PLANTED)
    attempt = Attempt.objects.create(
        task=task, attempt_no=1, ray_submission_id=f"{task.task_id}--a01", log_path=str(log), start_time=timezone.now()
    )
    for state in (S.SUBMITTING, S.SUBMITTED, S.RUNNING):
        task.transition(state, role=Role.SCHEDULER, actor="scheduler")
    Attempt.objects.filter(pk=attempt.pk).update(end_time=timezone.now())
    task.transition(S.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")

    argus = argus_as(alice)
    for args in (["logs", task.task_id], ["logs", task.task_id, "-n", "2"], ["logs", task.task_id, "-f"]):
        result = argus.run(*args)
        no_traceback(result)
        assert result.returncode == 0, result.stderr
        assert leaks(result.stdout.encode()) == [], args
        assert result.stdout.endswith("last [redacted]\n"), args
