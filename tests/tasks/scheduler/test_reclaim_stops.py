"""A reclaim's life, with a fake Ray and time moved by hand: the checkpoints the watch notes, the
reclaimed attempt stopping after its checkpoint, when its due checkpoint does not come, or at
once; its withdrawal; and what follows it (back in its place, never counted, the rules a
preemption's end obeys, the ledger, /metrics)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from prometheus_client.parser import text_string_to_metric_families

from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.scheduler import preempt
from tasks.scheduler.reclaim import late_margin
from tasks.scheduler.tick import tick
from tasks.usage.models import UsageRecord
from tests.accounts.groups.conftest import make_group as make_group  # the groups' own fixture
from tests.tasks.conftest import Clock
from tests.tasks.scheduler.test_preemption import save_checkpoint
from tests.tasks.scheduler.test_watch import running, stopped_by_argus

pytestmark = pytest.mark.django_db
S = TaskState
GRACE = 300
GPUS = 4  # PPO_SPEC's


@pytest.fixture(autouse=True)
def reclaim_grace(settings) -> None:
    settings.ARGUS_RECLAIM_GRACE_S = GRACE


def scene(alice: User, bob: User, make_task, fake_ray, clock: Clock, make_group, ran_s: float = 0, ages=(), **more):
    """alice (group nlp, no quota) borrows the only node and runs ``ran_s``, saving checkpoints
    ``ages`` seconds ago; then bob (vision, the node's 4 GPUs) submits."""
    make_group("nlp", alice, nominal_gpus=0)
    make_group("vision", bob, nominal_gpus=4)
    ray = fake_ray([4])
    victim = make_task(alice, stall_timeout_s=None, **more)
    attempt = running(ray, victim, clock)
    clock.advance(ran_s)
    checkpoints(victim, clock, *ages)
    owner = make_task(bob)
    return ray, victim, attempt, owner


def checkpoints(victim: Task, clock: Clock, *ages: float) -> None:
    """verl saved at these many seconds ago, oldest first, each seen by a tick."""
    now = clock.now
    for age in ages:
        clock.now = now - timedelta(seconds=age)
        save_checkpoint(victim, clock)
        tick()
    clock.now = now


def reclaim(victim: Task, owner: Task, clock: Clock) -> Attempt:
    """The tick in which bob's task, within its group's quota, finds its room borrowed: admission
    chooses alice's task (tasks.scheduler.reclaim.choose) and launch marks it."""
    tick()
    attempt = Attempt.objects.get(task=victim, attempt_no=1)
    assert attempt.reclaim and (attempt.preempted_at, attempt.preempted_for_id) == (clock.now, owner.pk)
    return attempt


def test_the_watch_notes_each_checkpoint_of_the_attempt_and_the_time_between(alice, make_task, fake_ray, clock):
    victim = make_task(alice, stall_timeout_s=None)
    attempt = running(fake_ray([4]), victim, clock)
    start = clock.now
    clock.advance(-10)
    save_checkpoint(victim, clock)  # an earlier attempt's: older than this one
    clock.advance(110)
    tick()
    attempt.refresh_from_db()
    assert (attempt.checkpoint_at, attempt.checkpoint_every_s) == (None, None)
    save_checkpoint(victim, clock)
    tick()
    attempt.refresh_from_db()
    assert (attempt.checkpoint_at, attempt.checkpoint_every_s) == (start + timedelta(seconds=100), None)
    clock.advance(250)
    tick()  # nothing new
    save_checkpoint(victim, clock)
    tick()
    attempt.refresh_from_db()
    assert (attempt.checkpoint_at, attempt.checkpoint_every_s) == (start + timedelta(seconds=350), 250)


def test_a_victim_due_to_save_runs_on_until_it_saved_then_goes_back_in_its_place(
    alice, bob, make_task, fake_ray, clock, make_group
):
    ray, victim, attempt, owner = scene(
        alice, bob, make_task, fake_ray, clock, make_group, ran_s=500, ages=(400, 100), max_retries=0
    )  # every 300 s: the next is due in 200 s
    attempt = reclaim(victim, owner, clock)
    event = victim.events.get(kind=EventKind.RECLAIMED)
    assert event.message == (
        "Reclaimed by group vision, whose quota it borrowed, for a task within that quota: stops at its next "
        "checkpoint, due within 200 s; then waits in its place and resumes from its checkpoint."
    )
    assert owner.task_id not in event.message  # bob's task id is not alice's to see
    assert event.data == {"group": "vision", "stops_in_s": 200, "grace_s": GRACE}

    clock.advance(199)
    tick()
    assert ray.stopped == []
    clock.advance(1)
    save_checkpoint(victim, clock)
    tick()
    stopped_by_argus(ray, victim, attempt)
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.RECLAIMED
    assert attempt.stop_line == "reclaimed by group vision, whose quota it borrowed, after it saved a checkpoint"
    # Back in its place, though max_retries is 0: a reclaim is never counted.
    assert victim.state in (S.QUEUED, S.PENDING_RESOURCES)
    back = victim.events.get(kind=EventKind.RETRY_SCHEDULED)
    assert back.message == (
        "Attempt 1 was reclaimed (reclaimed by group vision, whose quota it borrowed, after it saved a "
        "checkpoint); back in the queue in its place."
    )
    owner.refresh_from_db()
    assert owner.state == S.SUBMITTED  # the room went to the group that owns it


def test_a_due_checkpoint_that_does_not_come_is_waited_for_its_margin_only(
    alice, bob, make_task, fake_ray, clock, make_group
):
    ray, victim, attempt, owner = scene(alice, bob, make_task, fake_ray, clock, make_group, ran_s=500, ages=(400, 100))
    reclaim(victim, owner, clock)
    margin = late_margin(300)
    assert margin == 30
    clock.advance(200 + margin - 1)
    tick()
    assert ray.stopped == []
    clock.advance(1)
    tick()
    stopped_by_argus(ray, victim, attempt)
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.RECLAIMED
    assert attempt.stop_line == (
        "reclaimed by group vision, whose quota it borrowed; the checkpoint due 3 min after it was chosen did "
        "not come within 30 s of its time"
    )


@pytest.mark.parametrize("ages", [(), (100,), (900, 100)], ids=["none", "one", "due-past-the-grace"])
def test_a_victim_with_no_checkpoint_due_within_the_grace_stops_at_once(
    alice, bob, make_task, fake_ray, clock, make_group, ages
):
    # (900, 100): every 800 s, due in 700, past the grace of 300.
    ray, victim, attempt, owner = scene(alice, bob, make_task, fake_ray, clock, make_group, ran_s=1000, ages=ages)
    reclaim(victim, owner, clock)
    event = victim.events.get(kind=EventKind.RECLAIMED)
    assert "for a task within that quota: stops now; then waits in its place" in event.message
    assert event.data["stops_in_s"] == 0
    tick()
    stopped_by_argus(ray, victim, attempt)
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.RECLAIMED
    assert attempt.stop_line == (
        "reclaimed by group vision, whose quota it borrowed; no checkpoint of its was due within "
        f"ARGUS_RECLAIM_GRACE_S ({GRACE} s), so it stopped at once"
    )


def test_the_users_without_a_group_reclaim_in_their_own_name(alice, bob, make_task, fake_ray, clock, make_group):
    make_group("nlp", alice, nominal_gpus=0)
    ray = fake_ray([4])
    victim = make_task(alice, stall_timeout_s=None)
    running(ray, victim, clock)
    attempt = reclaim(victim, make_task(bob), clock)
    assert victim.events.get(kind=EventKind.RECLAIMED).message.startswith(
        "Reclaimed by the users without a group, whose quota it borrowed"
    )
    tick()
    stopped_by_argus(ray, victim, attempt)
    assert Attempt.objects.get(pk=attempt.pk).stop_line.startswith("reclaimed by the users without a group")


def test_a_reclaim_is_withdrawn_when_the_task_it_serves_no_longer_waits(
    alice, bob, make_task, fake_ray, clock, make_group
):
    ray, victim, attempt, owner = scene(alice, bob, make_task, fake_ray, clock, make_group, ran_s=500, ages=(400, 100))
    reclaim(victim, owner, clock)
    assert owner.cancel(actor="api:bob") is True
    clock.advance(GRACE)
    tick()
    assert ray.stopped == []
    attempt.refresh_from_db()
    assert (attempt.preempted_at, attempt.preempted_for_id, attempt.reclaim) == (None, None, False)
    withdrawn = victim.events.filter(kind=EventKind.RECLAIMED).last()
    assert withdrawn is not None and withdrawn.data == {"withdrawn": True}
    assert withdrawn.message.startswith("Reclaim withdrawn: the task it made room for ")
    assert withdrawn.message.endswith("; it runs on.")
    victim.refresh_from_db()
    assert victim.state == S.RUNNING


def test_a_reclaimed_task_counts_as_preempted_for_the_minimum_run_and_yielding(alice, bob, make_task):
    victim = make_task(alice, state=S.RUNNING)
    owner = make_task(bob)
    Attempt.objects.create(
        task=victim, attempt_no=1, ray_submission_id="v--a01", failure_kind=FailureKind.RECLAIMED, preempted_for=owner
    )
    assert preempt.resumed_after_preemption() == {(victim.pk, 2)}
    Task.objects.filter(pk=victim.pk).update(state=S.QUEUED)
    assert preempt.yielded() == {victim.pk: owner.pk}  # it does not retake the room while bob's task waits


def test_a_reclaimed_attempts_lost_work_is_in_the_ledger(alice, bob, make_task, fake_ray, clock, make_group):
    # Its only checkpoint, step 20, a minute ago: no next one is due, it stops at once.
    ray, victim, attempt, owner = scene(alice, bob, make_task, fake_ray, clock, make_group, ran_s=1000, ages=(60,))
    (checkpoint_dir(alice.username, victim.task_id) / "global_step_20").mkdir()
    # verl started from scratch and logged step 25.
    Attempt.objects.filter(pk=attempt.pk).update(resume_known=True, last_step=25)
    reclaim(victim, owner, clock)
    tick()
    stopped_by_argus(ray, victim, attempt)
    row = UsageRecord.objects.get(attempt=attempt)
    attempt.refresh_from_db()
    assert (attempt.failure_kind, attempt.checkpoint_step) == (FailureKind.RECLAIMED, 20)
    assert "so it stopped at once" in attempt.stop_line
    assert row.gpu_seconds == GPUS * 1000
    assert row.lost_gpu_seconds == pytest.approx(GPUS * 1000 * 5 / 25)  # steps 21-25 of its 25


def test_metrics_count_reclaims_and_reclaimed_attempts(client, alice, bob, make_task, fake_ray, clock, make_group):
    ray, victim, attempt, owner = scene(alice, bob, make_task, fake_ray, clock, make_group)
    reclaim(victim, owner, clock)
    tick()
    stopped_by_argus(ray, victim, attempt)
    values = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(client.get("/metrics").content.decode())
        for sample in family.samples
    }
    assert values[("argus_preemptions_total", (("reason", "reclaimed"),))] == 1
    assert values[("argus_preemptions_total", (("reason", "preempted"),))] == 0
    assert values[("argus_attempt_failures", (("kind", "RECLAIMED"),))] == 1


def test_a_resumed_task_is_not_reclaimed_again_before_its_minimum_run(
    alice, bob, make_task, fake_ray, clock, make_group, settings
):
    settings.ARGUS_PREEMPT_MIN_RUN_S = 600
    ray, victim, first, owner = scene(alice, bob, make_task, fake_ray, clock, make_group)
    tick()  # reclaimed: no checkpoint is due, it stops at once
    tick()
    stopped_by_argus(ray, victim, first)
    assert Attempt.objects.get(pk=first.pk).failure_kind == FailureKind.RECLAIMED
    ray.set_status(owner.attempts.get().ray_submission_id, "SUCCEEDED")
    tick()  # bob's task ends; alice's resumes, on borrowed quota again
    resumed = victim.attempts.get(attempt_no=2)
    ray.set_status(resumed.ray_submission_id, "RUNNING", start_time=int(clock.now.timestamp() * 1000))
    tick()
    make_task(bob)  # vision wants its quota back at once
    clock.advance(60)
    tick()
    resumed.refresh_from_db()
    assert resumed.preempted_at is None  # it has run 60 s of its 600
    clock.advance(541)
    tick()
    resumed.refresh_from_db()
    assert resumed.preempted_at is not None and resumed.reclaim


def test_a_yield_ends_once_the_task_it_was_for_has_started_since(alice, bob, make_task, clock):
    # Found in review: alice's task was preempted for bob's, which then started (borrowing) and was
    # reclaimed for alice's, back in the queue: each latest attempt was stopped for the other,
    # both wait. Alice's yield was served when bob's task started; bob's still holds.
    victim, owner = make_task(alice), make_task(bob)
    Attempt.objects.create(
        task=victim,
        attempt_no=1,
        ray_submission_id="v--a01",
        failure_kind=FailureKind.PREEMPTED,
        preempted_for=owner,
        preempted_at=clock.now,
        created_at=clock.now - timedelta(hours=1),
    )
    clock.advance(60)
    Attempt.objects.create(
        task=owner,
        attempt_no=1,
        ray_submission_id="o--a01",
        failure_kind=FailureKind.RECLAIMED,
        preempted_for=victim,
        preempted_at=clock.now + timedelta(seconds=600),
        created_at=clock.now,
    )
    assert preempt.yielded() == {owner.pk: victim.pk}
