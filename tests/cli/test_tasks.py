"""submit, ls, show, cancel, resubmit, queue, cluster, logs: the installed command, a live server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.utils import timezone

from tasks.attempts import Attempt
from tasks.choices import Role, TaskState
from tasks.models import ClusterState, Task
from tests.cli.conftest import no_traceback
from tests.conftest import PPO_SPEC, grant_high_priority


@pytest.fixture
def spec_file(tmp_path: Path, datasets: Path) -> Path:
    path = tmp_path / "ppo.yaml"
    path.write_text(PPO_SPEC)
    return path


def test_submit_prints_the_new_task_id(alice, argus_as, spec_file):
    result = argus_as(alice).run("submit", str(spec_file))
    assert result.returncode == 0, result.stderr
    task = Task.objects.get()
    assert result.stdout == f"{task.task_id}\n"
    assert (task.user, task.state, task.spec_raw) == (alice, TaskState.QUEUED, PPO_SPEC)


def test_submit_reads_standard_input_and_answers_json(alice, argus_as, datasets):
    result = argus_as(alice).run("submit", "-", "--json", input=PPO_SPEC)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["task_id"] == Task.objects.get().task_id


def test_a_bad_spec_names_every_wrong_field(alice, argus_as, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: ppo\nnnodes: 0\nn_gpus_per_node: 4\ncolour: blue\n")
    result = argus_as(alice).run("submit", str(bad))
    assert result.returncode == 3
    no_traceback(result)
    for field in ("nnodes", "colour", "model_id"):
        assert f"  {field}: " in result.stderr, result.stderr
    assert not Task.objects.exists()


HIGH_REFUSED = (
    "error: priority: high is not allowed for alice; an administrator can grant it "
    "(can_use_high_priority, in the admin site or PATCH /api/v2/users/alice)\n"
)


def test_priority_high_without_the_grant_says_who_can_grant_it(alice, argus_as, spec_file):
    spec_file.write_text(PPO_SPEC + "priority: high\n")
    argus = argus_as(alice)
    result = argus.run("submit", str(spec_file))
    assert result.returncode == 3
    no_traceback(result)
    assert result.stderr == HIGH_REFUSED
    assert not Task.objects.exists()
    grant_high_priority(alice)
    assert argus.run("submit", str(spec_file)).returncode == 0
    assert Task.objects.get().priority == "high"


def test_ls_filters_and_shows_only_the_users_tasks(alice, bob, argus_as, make_task):
    queued, failed = make_task(alice), make_task(alice)
    failed.transition(TaskState.CANCELED, actor="api:alice")
    bobs = make_task(bob)
    argus = argus_as(alice)

    table = argus.run("ls")
    assert table.returncode == 0, table.stderr
    assert queued.task_id in table.stdout and failed.task_id in table.stdout
    assert bobs.task_id not in table.stdout
    assert "TASK" in table.stdout and "1x4" in table.stdout

    only = json.loads(argus.run("ls", "--state", "canceled", "--json").stdout)
    assert [row["task_id"] for row in only] == [failed.task_id]
    assert json.loads(argus.run("ls", "--workload", "sft", "--json").stdout) == []
    assert len(json.loads(argus.run("ls", "-n", "1", "--json").stdout)) == 1
    bad = argus.run("ls", "--state", "DONE")
    assert bad.returncode == 2 and "DONE" in bad.stderr


def test_show_gives_the_task_and_its_attempts(alice, bob, argus_as, make_task):
    task = make_task(alice)
    Attempt.objects.create(task=task, attempt_no=1, ray_submission_id=f"{task.task_id}--a01", node_ip="10.0.0.7")
    argus = argus_as(alice)
    result = argus.run("show", task.task_id)
    assert result.returncode == 0, result.stderr
    assert task.task_id in result.stdout and "QUEUED" in result.stdout and "10.0.0.7" in result.stdout
    assert json.loads(argus.run("show", task.task_id, "--json").stdout)["attempts"][0]["attempt_no"] == 1

    hidden = argus.run("show", make_task(bob).task_id)
    assert hidden.returncode == 3 and "error:" in hidden.stderr
    no_traceback(hidden)


def test_cancel_a_waiting_task(alice, argus_as, make_task):
    task = make_task(alice)
    argus = argus_as(alice)
    result = argus.run("cancel", task.task_id)
    assert result.returncode == 0, result.stderr
    assert "CANCELED" in result.stderr
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    again = argus.run("cancel", task.task_id)
    assert again.returncode == 3 and f"Task {task.task_id} is already CANCELED." in again.stderr


def test_cancel_a_running_task_requests_a_stop(alice, argus_as, make_task):
    task = make_task(alice)
    for state in (TaskState.SUBMITTING, TaskState.SUBMITTED, TaskState.RUNNING):
        task.transition(state, role=Role.SCHEDULER, actor="scheduler")
    result = argus_as(alice).run("cancel", task.task_id, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cancel_requested"] is True
    task.refresh_from_db()
    assert task.state == TaskState.RUNNING and task.cancel_requested_at is not None


def test_resubmit_makes_a_new_task_from_the_same_spec(alice, argus_as, make_task):
    grant_high_priority(alice)
    old = make_task(alice, PPO_SPEC + "priority: high\n")
    old.transition(TaskState.CANCELED)
    result = argus_as(alice).run("resubmit", old.task_id)
    assert result.returncode == 0, result.stderr
    new = Task.objects.exclude(pk=old.pk).get()
    assert result.stdout == f"{new.task_id}\n"
    assert new.spec_raw == old.spec_raw and new.priority == "high" and new.state == TaskState.QUEUED


def test_resubmit_of_a_high_task_needs_the_grant_too(alice, argus_as, make_task):
    old = make_task(alice, PPO_SPEC + "priority: high\n", state=TaskState.CANCELED)  # e.g. the grant withdrawn since
    result = argus_as(alice).run("resubmit", old.task_id)
    assert result.returncode == 3
    no_traceback(result)
    assert result.stderr == HIGH_REFUSED
    assert Task.objects.get() == old


def test_queue_gives_positions_and_reasons(alice, bob, argus_as, make_task):
    first = make_task(alice, pending_reason="needs 1 node with 4 free GPUs; none has them now")
    make_task(bob)
    argus = argus_as(alice)
    rows = json.loads(argus.run("queue", "--json").stdout)
    assert [(row["position"], row["task_id"]) for row in rows] == [(1, first.task_id), (2, None)]
    table = argus.run("queue")
    assert table.returncode == 0, table.stderr
    assert "needs 1 node with 4 free GPUs" in table.stdout and "(another user's)" in table.stdout
    assert rows[1]["note"] == "behind 1 task of yours"  # bob's task waits behind alice's
    assert "behind 1 task of yours" in table.stdout


def test_cluster_gives_nodes_and_free_gpus(alice, argus_as):
    node = {"node_id": "abcdef0123456789", "ip": "10.0.0.9", "alive": True, "is_head": False, "is_worker": True}
    node |= {"gpus_total": 4.0, "gpus_free": 3.0, "cpus_total": 16.0, "cpus_free": 12.0}
    ClusterState.objects.create(name="default", reachable=True, nodes=[node], checked_at=timezone.now())
    argus = argus_as(alice)
    result = argus.run("cluster")
    assert result.returncode == 0, result.stderr
    assert "GPUs free 3 of 4" in result.stdout and "10.0.0.9" in result.stdout and "3/4" in result.stdout
    assert json.loads(argus.run("cluster", "--json").stdout)["gpus_free"] == 3.0


def test_logs_whole_and_tail(alice, argus_as, make_task, tmp_path):
    task = make_task(alice)
    log = tmp_path / "driver.log"
    log.write_text("".join(f"line {n}\n" for n in range(1, 11)))
    Attempt.objects.create(task=task, attempt_no=1, ray_submission_id=f"{task.task_id}--a01", log_path=str(log))
    argus = argus_as(alice)
    assert argus.run("logs", task.task_id).stdout == log.read_text()
    assert argus.run("logs", task.task_id, "--tail", "2").stdout == "line 9\nline 10\n"
    missing = argus.run("logs", task.task_id, "--attempt", "5")
    assert missing.returncode == 3 and "has no attempt 5" in missing.stderr


def test_brackets_in_server_text_are_printed_as_they_are(alice, argus_as, make_task):
    # rich would read "[/]" as markup and crash; server and user text is never markup.
    summary = "RayTaskError(ValueError): [36mray::TaskRunner.run()[/] [bold]x"
    task = make_task(alice)
    task.transition(TaskState.CANCELED, error_summary=summary)
    argus = argus_as(alice)
    for args in (["ls"], ["show", task.task_id], ["wait", task.task_id]):
        result = argus.run(*args)
        no_traceback(result)
        assert summary in result.stdout + result.stderr, args
    missing = argus.run("show", "[/]nothing")
    assert missing.returncode == 3 and "error:" in missing.stderr
    no_traceback(missing)


def test_submit_sends_a_json_spec_as_json(alice, argus_as, datasets):
    # JSON that is not YAML (tab-indented, as `jq --tab` and json.dump(indent="\t") write it) is
    # a spec all the same: the CLI sends JSON as JSON.
    spec: dict[str, object] = {line.split(": ")[0]: line.split(": ", 1)[1] for line in PPO_SPEC.splitlines()}
    spec.update(nnodes=1, n_gpus_per_node=4)
    result = argus_as(alice).run("submit", "-", input=json.dumps(spec, indent="\t"))
    assert result.returncode == 0, result.stderr
    task = Task.objects.get()
    assert result.stdout == f"{task.task_id}\n" and (task.workload, task.nnodes) == ("ppo", 1)
