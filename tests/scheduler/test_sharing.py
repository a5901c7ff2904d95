"""Sharing a contended cluster on a real Ray cluster (a head and two 4-GPU workers), through the
scheduler's tick: preemption that resumes, a group reclaiming its quota, per-user running limits,
fair-share order, and the admission pause."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.standin import standin_spec
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.models import Usage
from tasks.pause import AdmissionControl
from tasks.usage.models import UsageRecord
from tests.accounts.groups.conftest import make_group as make_group  # the groups' own fixture
from tests.conftest import PPO_SPEC, grant_high_priority
from tests.scheduler.conftest import state_of, tick_until
from tests.scheduler.test_durable import steps_in

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState

# Both workers, 100 steps of 0.2 s, a checkpoint every 5 steps. The high task comes at step 7;
# the preemption stops the run at its next checkpoint (a tick, a save, Ray's stop: a few
# seconds), with some 80 steps (16 s) still to go; the second attempt runs what is left.
WHOLE_CLUSTER = PPO_SPEC.replace("nnodes: 1", "nnodes: 2") + "total_training_steps: 100\nsave_freq: 5\n"


def test_a_high_task_preempts_a_preemptible_one_which_resumes_and_finishes(
    alice, bob, submit, client_for, on_ray, datasets, settings
):
    settings.ARGUS_PREEMPT_GRACE_S = 60  # it stops at its next checkpoint, a second away
    low = submit(alice, WHOLE_CLUSTER + "preemptible: true\n")
    tick_until(lambda: state_of(low) == S.RUNNING)
    first = low.attempts.get()
    tick_until(lambda: len(steps_in(Path(first.log_path))) >= 7, timeout=60)

    high = submit(grant_high_priority(bob), standin_spec(gpus=4, steps=3) + "priority: high\n")
    tick_until(lambda: state_of(high) == S.SUCCEEDED, timeout=120)
    first.refresh_from_db()
    assert first.failure_kind == FailureKind.PREEMPTED
    assert first.stop_line == "preempted for a task of higher priority, after it saved a checkpoint"
    preempted = low.events.get(kind=EventKind.PREEMPTED)
    assert preempted.data == {"grace_s": 60, "for_priority": "high"}
    # bob's task started only once alice's had stopped: never more GPUs than the cluster has.
    assert high.attempts.get().created_at > first.end_time

    tick_until(lambda: state_of(low) == S.SUCCEEDED, timeout=150)
    second = low.attempts.get(attempt_no=2)
    assert second.resumed_from_step is not None and second.resumed_from_step >= 5
    assert steps_in(Path(second.log_path))[0] == second.resumed_from_step + 1
    assert low.max_retries == 0  # a preemption is not a failure: no retry was spent on it
    metrics = client_for(alice).get("/metrics")
    assert b'argus_attempt_failures{kind="PREEMPTED"} 1.0' in metrics.content

    # The usage ledger: both of alice's attempts, on 8 GPUs; the first's lost work is what it ran
    # past the checkpoint the second resumed from (settle read that checkpoint).
    first.refresh_from_db()
    assert first.checkpoint_step == second.resumed_from_step
    ledger = {row.attempt_id: row for row in UsageRecord.objects.filter(task=low)}
    assert set(ledger) == {first.pk, second.pk}
    for attempt in (first, second):
        assert attempt.start_time is not None and attempt.end_time is not None
        assert ledger[attempt.pk].gpu_seconds == 8 * (attempt.end_time - attempt.start_time).total_seconds()
    assert 0 <= ledger[first.pk].lost_gpu_seconds < ledger[first.pk].gpu_seconds
    assert ledger[second.pk].lost_gpu_seconds == 0
    report = client_for(alice).get("/api/v2/usage").json()["rows"]
    used = sum(row.gpu_seconds for row in ledger.values())
    assert [(r["user"], r["gpu_hours"], r["lost_gpu_hours"], r["tasks"]) for r in report] == [
        ("alice", round(used / 3600, 3), round(ledger[first.pk].lost_gpu_seconds / 3600, 3), 1)
    ]


def test_a_group_reclaims_its_quota_from_the_borrowed_task_that_loses_the_least(
    alice, bob, admin, submit, client_for, on_ray, datasets, settings, make_group
):
    """nlp has no quota and borrows both nodes; vision owns the cluster and submits. Of nlp's
    two tasks, the one that saves every step loses the least: it gives its node back at its
    next checkpoint, vision's task runs, and it resumes from its checkpoint. The other, with no
    checkpoint (all its work lost if stopped), runs on."""
    settings.ARGUS_RECLAIM_GRACE_S = 60
    make_group("nlp", alice, nominal_gpus=0)
    make_group("vision", bob, nominal_gpus=8)
    saving = submit(alice, PPO_SPEC + "total_training_steps: 60\nsave_freq: 1\n")
    unsaved = submit(alice, PPO_SPEC + "total_training_steps: 60\nsave_freq: -1\n")
    tick_until(lambda: state_of(saving) == S.RUNNING and state_of(unsaved) == S.RUNNING)
    first = saving.attempts.get()
    # 3 s in: the unsaved task would lose 12 GPU-seconds, the saving one under one tick's worth.
    tick_until(lambda: len(steps_in(Path(first.log_path))) >= 15, timeout=60)

    owner = submit(bob, standin_spec(gpus=4, steps=3))
    tick_until(lambda: state_of(owner) == S.SUCCEEDED, timeout=120)
    first.refresh_from_db()
    assert first.failure_kind == FailureKind.RECLAIMED
    assert first.stop_line == "reclaimed by group vision, whose quota it borrowed, after it saved a checkpoint"
    assert saving.events.get(kind=EventKind.RECLAIMED).data["group"] == "vision"
    assert owner.attempts.get().created_at > first.end_time  # never more GPUs than the cluster has
    assert not unsaved.events.filter(kind=EventKind.RECLAIMED).exists()

    tick_until(lambda: state_of(saving) == S.SUCCEEDED and state_of(unsaved) == S.SUCCEEDED, timeout=120)
    second = saving.attempts.get(attempt_no=2)
    assert second.resumed_from_step is not None and second.resumed_from_step >= 10
    assert steps_in(Path(second.log_path))[0] == second.resumed_from_step + 1
    assert unsaved.attempts.get().failure_kind == ""

    # The usage report by group: nlp borrowed all it ran and lost what its reclaimed attempt ran
    # past its checkpoint; vision ran in its quota.
    ledger = {row.attempt_id: row for row in UsageRecord.objects.all()}
    assert len(ledger) == 4
    nlp = [row for row in ledger.values() if row.group == "nlp"]
    assert {row.task_id for row in nlp} == {saving.pk, unsaved.pk}
    lost = ledger[first.pk].lost_gpu_seconds
    assert 0 <= lost < ledger[first.pk].gpu_seconds
    used = sum(row.gpu_seconds for row in nlp)
    vision = ledger[owner.attempts.get().pk].gpu_seconds
    report = client_for(admin).get("/api/v2/usage?by=group").json()["rows"]
    columns = ("group", "gpu_hours", "in_quota_gpu_hours", "borrowed_gpu_hours", "lost_gpu_hours", "tasks")
    assert [tuple(row[column] for column in columns) for row in report] == [
        ("nlp", round(used / 3600, 3), 0, round(used / 3600, 3), round(lost / 3600, 3), 2),
        ("vision", round(vision / 3600, 3), round(vision / 3600, 3), 0, 0, 1),
    ]


def test_a_task_that_is_not_preemptible_is_never_stopped(alice, bob, submit, on_ray, datasets, settings):
    settings.ARGUS_PREEMPT_GRACE_S = 0
    low = submit(alice, standin_spec(nnodes=2, gpus=4, steps=15, step_s=0.2))
    tick_until(lambda: state_of(low) == S.RUNNING)
    high = submit(grant_high_priority(bob), standin_spec(gpus=4, steps=2) + "priority: high\n")
    tick_until(lambda: state_of(low) == S.SUCCEEDED, timeout=90)
    assert low.attempts.get().failure_kind == ""
    assert not low.events.filter(kind=EventKind.PREEMPTED).exists()
    tick_until(lambda: state_of(high) == S.SUCCEEDED, timeout=90)


def test_a_users_running_limit_holds_their_second_task_while_others_run(
    alice, bob, admin, submit, client_for, on_ray, datasets
):
    response = client_for(admin).patch("/api/v2/users/alice", {"max_running_tasks": 1}, format="json")
    assert response.status_code == 200, response.content
    first = submit(alice, standin_spec(gpus=4, steps=15))
    second = submit(alice, standin_spec(gpus=4, steps=2))
    other = submit(bob, standin_spec(gpus=4, steps=2))
    tick_until(lambda: state_of(other) == S.SUCCEEDED and state_of(first) == S.RUNNING, timeout=90)
    second.refresh_from_db()
    assert second.state in (S.QUEUED, S.PENDING_RESOURCES)
    assert second.pending_reason == "waits for its user's limit: alice runs 1 task; max_running_tasks is 1"
    assert not second.attempts.exists()
    tick_until(lambda: state_of(second) == S.SUCCEEDED, timeout=120)
    assert second.attempts.get().created_at >= first.attempts.get().end_time


def test_a_lighter_user_goes_first_within_a_priority(alice, bob, make_user, submit, on_ray, datasets, settings):
    settings.ARGUS_FAIR_SHARE_WINDOW_S = 3600
    # alice ran 100 GPU-hours this week; bob nothing.
    Usage.objects.create(user=alice, gpu_seconds=100 * 3600.0)
    carol = make_user("carol")
    blocker = submit(carol, standin_spec(nnodes=2, gpus=4, steps=10))
    tick_until(lambda: state_of(blocker) == S.RUNNING)
    heavy = submit(alice, standin_spec(nnodes=2, gpus=4, steps=2))
    light = submit(bob, standin_spec(nnodes=2, gpus=4, steps=2))
    tick_until(lambda: state_of(light) == S.SUCCEEDED, timeout=120)
    assert state_of(heavy) != S.SUCCEEDED or heavy.attempts.get().created_at > light.attempts.get().created_at
    tick_until(lambda: state_of(heavy) == S.SUCCEEDED, timeout=120)
    assert heavy.attempts.get().created_at > light.attempts.get().end_time


def test_while_admission_is_paused_running_tasks_go_on_and_nothing_starts(
    alice, admin, submit, client_for, on_ray, datasets
):
    running = submit(alice, standin_spec(gpus=4, steps=10))
    tick_until(lambda: state_of(running) == S.RUNNING)
    response = client_for(admin).post(
        "/api/v2/admission", {"paused": True, "reason": "driver upgrade at 15:00"}, format="json"
    )
    assert response.status_code == 200, response.content
    waiting = submit(alice, standin_spec(gpus=4, steps=2))
    tick_until(lambda: state_of(running) == S.SUCCEEDED, timeout=90)
    waiting.refresh_from_db()
    assert waiting.state == S.QUEUED and not waiting.attempts.exists()
    assert waiting.pending_reason == (
        "admission is paused: driver upgrade at 15:00; running tasks go on, nothing new starts"
    )
    assert client_for(alice).post("/api/v2/admission", {"paused": False}, format="json").status_code == 403
    AdmissionControl.set(False, "", actor="admin:admin")
    tick_until(lambda: state_of(waiting) == S.SUCCEEDED, timeout=90)
