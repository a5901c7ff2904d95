"""Retry budgets that start again (issue 25, item 6), with a fake Ray and time held still: an
operator's requeue starts every budget afresh, and node failures (and jobs Ray lost) are
counted since the last attempt that made progress, a checkpoint newer than the one it resumed
from. What the events and the summary say of a budget is what was counted."""

from __future__ import annotations

import pytest

from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.models import Task
from tasks.scheduler.tick import tick
from tests.tasks.pipelines.test_pipelines import checkpoint
from tests.tasks.scheduler.test_watch import log

pytestmark = pytest.mark.django_db
S = TaskState


def node_died(node: str) -> str:
    """verl's TaskRunner when a WorkerDict went with its node, in Ray's words (as Hydra prints it)."""
    return (
        "Error executing job with overrides: ['trainer.nnodes=1']\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/verl/verl/trainer/main_ppo.py", line 42, in main\n'
        "    run_ppo(config)\n"
        "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunner.run() (pid=8812, ip=10.0.0.2)\n"
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: WorkerDict\n"
        f"The actor died because its node has died. Node Id: {node}\n"
        "\tthe actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats\n"
        "\n"
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
    )


CRASH = "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access was encountered\n"


def next_attempt(ray, task: Task) -> Attempt:
    """The task's next attempt, admitted and running on Ray."""
    tick()
    attempt = task.attempts.order_by("-attempt_no").first()
    assert attempt is not None and attempt.end_time is None, attempt
    ray.set_status(attempt.ray_submission_id, "RUNNING")
    tick()
    return attempt


def ends(ray, task: Task, text: str, saved: int | None = None) -> Attempt:
    """The task's next attempt runs, leaves a checkpoint of step ``saved`` (None: saves none),
    and fails with ``text`` at the end of its log; returns it settled."""
    attempt = next_attempt(ray, task)
    if saved is not None:
        checkpoint(task, saved, actor=True)
    log(task, attempt, text)
    ray.set_status(attempt.ray_submission_id, "FAILED", error_type="JOB_ENTRYPOINT_COMMAND_ERROR", message="exit 1")
    tick()
    task.refresh_from_db()
    attempt.refresh_from_db()
    assert attempt.end_time is not None
    return attempt


def node(number: int) -> str:
    return f"{number:02d}" + "ab" * 27


def retry_event(attempt: Attempt):
    return attempt.task.events.get(attempt=attempt, kind=EventKind.RETRY_SCHEDULED)


def test_an_operator_requeue_starts_the_node_failure_budget_afresh(alice, make_task, fake_ray, settings):
    settings.ARGUS_NODE_FAILURE_RETRIES = 1
    ray = fake_ray([4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    first = ends(ray, task, node_died(node(1)))
    assert first.failure_kind == FailureKind.NODE_FAILURE and task.state in (S.QUEUED, S.SUBMITTED)
    ends(ray, task, node_died(node(2)))
    assert task.state == S.FAILED
    assert task.error_summary.startswith("Nodes died under 2 of its attempts (01abab")
    task.requeue(actor="admin:root")
    requeued = task.events.get(actor="admin:root", to_state=S.QUEUED)
    assert requeued.message == "Requeued by an operator; its retry budgets start afresh."
    assert requeued.data == {"budgets_from_attempt": 3}
    third = ends(ray, task, node_died(node(3)))
    assert third.failure_kind == FailureKind.NODE_FAILURE
    assert task.state in (S.QUEUED, S.SUBMITTED)  # not FAILED at the first death after the requeue
    event = retry_event(third)
    assert event.message.endswith("(node failure 1 of 1 since an operator requeued it).")
    assert event.data["budget"] == {"limit": "ARGUS_NODE_FAILURE_RETRIES", "count": 1, "of": 1, "since_attempt": 3}
    assert event.data["dead_nodes"] == ["03ababab"]  # not the nodes that died before the requeue
    ends(ray, task, node_died(node(4)))
    assert task.state == S.FAILED
    assert task.error_summary.startswith(
        "Nodes died under 2 of its attempts since an operator requeued it (03ababab, 04ababab); giving up after "
        "ARGUS_NODE_FAILURE_RETRIES (1)."
    )


def test_an_operator_requeue_starts_max_retries_afresh(alice, make_task, fake_ray):
    ray = fake_ray([4])
    task = make_task(alice, max_retries=1, stall_timeout_s=None)
    first = ends(ray, task, CRASH)
    assert retry_event(first).message == "Attempt 1 failed (RUNTIME_ERROR); retry 1 of 1."
    ends(ray, task, CRASH)
    assert task.state == S.FAILED
    task.requeue(actor="admin:root")
    third = ends(ray, task, CRASH)
    assert task.state in (S.QUEUED, S.SUBMITTED)
    event = retry_event(third)
    assert event.message == "Attempt 3 failed (RUNTIME_ERROR); retry 1 of 1 since an operator requeued it."
    assert event.data["budget"] == {"limit": "max_retries", "count": 1, "of": 1, "since_attempt": 3}
    fourth = ends(ray, task, CRASH)
    assert task.state == S.FAILED and task.error_summary.startswith("Attempt 4 failed (RUNTIME_ERROR)")
    assert task.events.get(attempt=fourth, to_state=S.FAILED).data["budget"]["count"] == 2


def test_node_failures_count_since_the_last_attempt_that_saved_a_newer_checkpoint(alice, make_task, fake_ray, settings):
    """A long run on a flaky cluster: every attempt trains and saves before its node goes, so no
    number of losses fails it. Losses that cost it all it did since its checkpoint add up."""
    settings.ARGUS_NODE_FAILURE_RETRIES = 2
    ray = fake_ray([4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    for number, saved in enumerate((10, 20, 30, 40, 50), start=1):
        attempt = ends(ray, task, node_died(node(number)), saved=saved)
        assert attempt.checkpoint_step == saved
        assert task.state in (S.QUEUED, S.SUBMITTED), task.error_summary
        event = retry_event(attempt)
        assert event.message.endswith(f"(node failure 1 of 2 since its checkpoint of step {saved}).")
        assert event.data["budget"]["since_attempt"] == number
    # Losses before any new checkpoint add up: attempt 5's, then two more, one too many.
    attempt = ends(ray, task, node_died(node(6)))
    assert attempt.checkpoint_step == 50  # the tracker still names step 50: no progress
    assert retry_event(attempt).message.endswith("(node failure 2 of 2 since its checkpoint of step 50).")
    assert retry_event(attempt).data["budget"] == {
        "limit": "ARGUS_NODE_FAILURE_RETRIES",
        "count": 2,
        "of": 2,
        "since_attempt": 5,
    }
    ends(ray, task, node_died(node(7)))
    assert task.state == S.FAILED
    assert task.error_summary.startswith(
        "Nodes died under 3 of its attempts since its checkpoint of step 50 (05ababab, 06ababab, 07ababab); "
        "giving up after ARGUS_NODE_FAILURE_RETRIES (2)."
    )


def test_an_attempt_that_only_reloaded_its_checkpoint_made_no_progress(alice, make_task, fake_ray, settings):
    """verl says where it resumed from; an attempt whose checkpoint at its end is that one saved
    nothing new, whatever an earlier attempt left."""
    settings.ARGUS_NODE_FAILURE_RETRIES = 1
    ray = fake_ray([4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    checkpoint(task, 30, actor=True)  # e.g. left there before its budget began
    resumed = "(TaskRunner pid=1) Setting global step to 30\n(TaskRunner pid=1) Resuming from /x/global_step_30\n"
    first = ends(ray, task, resumed + node_died(node(1)))
    assert (first.resumed_from_step, first.checkpoint_step) == (30, 30)
    second = ends(ray, task, resumed + node_died(node(2)))
    assert task.state == S.FAILED, retry_event(second).message
    assert task.error_summary.startswith("Nodes died under 2 of its attempts (01ababab, 02ababab)")


def test_jobs_ray_lost_count_since_the_last_progress_too(alice, make_task, fake_ray, settings):
    settings.ARGUS_LOST_RETRIES = 1
    ray = fake_ray([4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    for saved in (10, 20, 30):
        attempt = next_attempt(ray, task)
        checkpoint(task, saved, actor=True)
        ray.known.pop(attempt.ray_submission_id)  # the head restarted and forgot it
        tick()
        attempt.refresh_from_db()
        task.refresh_from_db()
        assert (attempt.failure_kind, attempt.checkpoint_step) == (FailureKind.LOST, saved)
        assert retry_event(attempt).message == (
            f"Ray lost attempt {attempt.attempt_no}; requeued (1 of 1 since its checkpoint of step {saved})."
        )
    attempt = next_attempt(ray, task)  # lost again, before any new checkpoint
    ray.known.pop(attempt.ray_submission_id)
    tick()
    task.refresh_from_db()
    assert task.state == S.FAILED
    assert task.error_summary.startswith("Ray lost the job 2 times since its checkpoint of step 30")
