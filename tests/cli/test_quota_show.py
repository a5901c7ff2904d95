"""`argus show` says whose quota a task's attempts ran in (issue 27 item 2)."""

from __future__ import annotations

from accounts.groups.models import QuotaGroup
from tasks.choices import Quota, TaskState
from tests.tasks.attempt_data import attempt_of


def test_show_gives_the_tasks_quota_and_each_attempts(alice, argus_as, make_task):
    vision = QuotaGroup.objects.create(name="vision", nominal_gpus=4)
    task = make_task(alice, state=TaskState.RUNNING)
    attempt_of(task, 4, Quota.IN_QUOTA, ray_status="FAILED")
    attempt_of(task, 4, Quota.BORROWED, vision)
    result = argus_as(alice).run("show", task.task_id)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.split() == ["quota", "borrowed"] for line in lines)
    assert "QUOTA" in result.stdout and "borrowed (vision)" in result.stdout
    never = make_task(alice)
    shown = argus_as(alice).run("show", never.task_id).stdout
    assert not any(line.startswith("quota") for line in shown.splitlines())
