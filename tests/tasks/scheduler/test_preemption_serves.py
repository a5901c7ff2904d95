"""Preemption that helps the task it was for, once: the victims' room is reserved for that task
from now + grace (backfill never takes it meanwhile), admission plans on the cluster as it is
after sync (no second, needless victim), a preemption stands only while its task would start,
a resumed victim is not chosen again before ARGUS_PREEMPT_MIN_RUN_S, and a victim does not take
back the room it freed while the task it freed it for waits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from accounts.models import UserLimits
from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.pause import AdmissionControl
from tasks.queue.request import Request
from tasks.scheduler.admission import Caps, Running, decide, preemption_holds
from tasks.scheduler.preempt import yielded
from tasks.scheduler.rooms import Room
from tasks.scheduler.tick import tick
from tests.conftest import PPO_SPEC
from tests.tasks.scheduler.test_preemption import GRACE, HIGH, save_checkpoint
from tests.tasks.scheduler.test_watch import running

pytestmark = pytest.mark.django_db
S = TaskState
PREEMPTIBLE = PPO_SPEC + "preemptible: true\n"
TWO_NODES = PPO_SPEC.replace("nnodes: 1", "nnodes: 2")


@pytest.fixture(autouse=True)
def preemption(settings) -> None:
    settings.ARGUS_PREEMPT_GRACE_S = GRACE
    settings.ARGUS_PREEMPTION = True
    settings.ARGUS_PREEMPT_MIN_RUN_S = 600


@pytest.fixture
def granted(bob):
    UserLimits.objects.update_or_create(user=bob, defaults={"can_use_high_priority": True})


def test_the_reservation_holds_the_victims_room_from_now_plus_grace():
    """Pure: n1 is free, n0 holds a 10-hour preemptible task; a high task needs both nodes. Its
    reservation starts when the victim's grace ends, so a 2-hour task may not take n1."""
    totals = {"n0": Room(4, 12), "n1": Room(4, 12)}
    free = {"n0": Room(0, 0), "n1": Room(4, 12)}
    victim = Running(1, {"n0": 4}, 12.0, ends_at=36_000.0, user="alice", preemptible=True, started_at=-10.0)
    high = Request(2, 2, 4, 12.0, "bob", 3600.0, priority=10)
    short = Request(3, 1, 4, 12.0, "carol", 7200.0)
    decision = decide(
        [high, short], free, totals, policy="backfill", now=0.0, running=[victim], preemption=True, grace=GRACE
    )
    assert decision.preempt == {1: 2}
    assert decision.reservations[2] == (GRACE, {"n0": 4, "n1": 4})
    assert decision.admitted == []  # the 2-hour task would still hold n1 when the high one starts
    # A task short enough to end within the grace may use n1 meanwhile.
    quick = Request(4, 1, 4, 12.0, "carol", GRACE - 20)
    decision = decide(
        [high, quick], free, totals, policy="backfill", now=0.0, running=[victim], preemption=True, grace=GRACE
    )
    assert [request.key for request, _ in decision.admitted] == [4]


def test_backfill_does_not_take_the_room_a_preemption_makes(alice, bob, make_user, make_task, fake_ray, clock, granted):
    carol = make_user("carol")
    ray = fake_ray([4, 4])
    victim = make_task(alice, PREEMPTIBLE, time_limit_s=36_000, stall_timeout_s=None)
    running(ray, victim, clock)
    high = make_task(bob, TWO_NODES + "priority: high\n", time_limit_s=3600)
    later = make_task(carol, time_limit_s=7200)
    tick()
    assert Attempt.objects.filter(task=victim).exclude(preempted_at=None).exists()
    later.refresh_from_db()
    assert later.state == S.PENDING_RESOURCES and not later.attempts.exists()
    clock.advance(GRACE)
    tick()  # the grace is over: the victim is stopped
    ray.set_status(victim.attempts.get().ray_submission_id, "STOPPED")
    tick()
    high.refresh_from_db()
    assert high.state == S.SUBMITTED  # at once, on the room it preempted for


def test_admission_plans_on_the_cluster_after_sync(alice, bob, make_task, fake_ray, clock, granted):
    """The victim's job ends in this tick's sync: Ray's count still showed its GPUs in use when
    the tick began. Admission reads again, and chooses no second victim."""
    ray = fake_ray([4, 4])
    first = make_task(alice, PREEMPTIBLE, stall_timeout_s=None)
    first_attempt = running(ray, first, clock)
    clock.advance(10)
    second = make_task(alice, PREEMPTIBLE, stall_timeout_s=None)
    second_attempt = running(ray, second, clock)
    for node in ray.nodes:
        node.ray_gpus_free, node.ray_cpus_free = 0.0, 2.0  # Ray counts both jobs' GPUs
    make_task(bob, HIGH)
    tick()
    chosen = Attempt.objects.exclude(preempted_at=None).get()
    assert chosen.pk == second_attempt.pk  # the most recently started
    save_checkpoint(second, clock)
    clock.advance(1)
    tick()  # stopped after its checkpoint
    freed = next(node for node in ray.nodes if node.node_id in second_attempt.placement)

    def ends_now(submission_id: str) -> None:
        if submission_id == second_attempt.ray_submission_id:
            freed.ray_gpus_free, freed.ray_cpus_free = 4.0, 14.0  # Ray frees them as the job ends

    ray.hooks["job"] = ends_now
    ray.set_status(second_attempt.ray_submission_id, "STOPPED")
    tick()
    first_attempt.refresh_from_db()
    assert first_attempt.preempted_at is None  # not a second victim
    assert Attempt.objects.filter(task__priority="high", placement=second_attempt.placement).exists()


def test_a_preemption_is_withdrawn_when_its_task_would_not_start(alice, bob, make_task, fake_ray, clock, granted):
    ray = fake_ray([4])
    victim = make_task(alice, PREEMPTIBLE, stall_timeout_s=None)
    attempt = running(ray, victim, clock)
    high = make_task(bob, HIGH)
    tick()
    attempt.refresh_from_db()
    assert attempt.preempted_for_id == high.pk

    # The task it serves waits for a retry later: it would not start now.
    high.__class__.objects.filter(pk=high.pk).update(next_run_at=clock.now + timedelta(seconds=600))
    clock.advance(5)
    tick()
    attempt.refresh_from_db()
    assert attempt.preempted_at is None and ray.stopped == []
    event = victim.events.filter(kind=EventKind.PREEMPTED).last()
    assert event is not None
    assert event.message == "Preemption withdrawn: the task it made room for waits to retry later; it runs on."


def test_a_preemption_is_withdrawn_while_admission_is_paused(alice, bob, make_task, fake_ray, clock, granted):
    ray = fake_ray([4])
    victim = make_task(alice, PREEMPTIBLE, stall_timeout_s=None)
    attempt = running(ray, victim, clock)
    make_task(bob, HIGH)
    tick()
    AdmissionControl.set(True, "maintenance", "api:root")
    tick()
    attempt.refresh_from_db()
    assert attempt.preempted_at is None
    assert "admission is paused" in victim.events.filter(kind=EventKind.PREEMPTED).last().message


def test_a_preemption_is_withdrawn_when_a_node_death_leaves_no_room(alice, bob, make_task, fake_ray, clock, granted):
    ray = fake_ray([4, 4])
    a = make_task(alice, PREEMPTIBLE, stall_timeout_s=None)
    running(ray, a, clock)
    b = make_task(alice, PREEMPTIBLE, stall_timeout_s=None)
    running(ray, b, clock)
    make_task(bob, TWO_NODES + "priority: high\n")
    tick()
    assert Attempt.objects.exclude(preempted_at=None).count() == 2
    ray.kill_node("n1")  # the high task needs two nodes: only one is left
    tick()
    assert Attempt.objects.exclude(preempted_at=None).count() == 0
    assert ray.stopped == []


def test_a_resumed_victim_is_not_chosen_again_before_its_minimum_run(alice, bob, make_task, fake_ray, clock, granted):
    ray = fake_ray([4])
    victim = make_task(alice, PREEMPTIBLE, stall_timeout_s=None)
    first = running(ray, victim, clock)
    high = make_task(bob, HIGH)
    tick()
    clock.advance(GRACE)
    tick()
    ray.set_status(first.ray_submission_id, "STOPPED")
    tick()  # the victim requeues; the high task starts
    high_attempt = high.attempts.get()
    ray.set_status(high_attempt.ray_submission_id, "SUCCEEDED")
    tick()  # the high task ends; the victim resumes
    resumed = victim.attempts.get(attempt_no=2)
    ray.set_status(resumed.ray_submission_id, "RUNNING")
    tick()
    make_task(bob, HIGH)  # another high task, at once
    clock.advance(60)
    tick()
    resumed.refresh_from_db()
    assert resumed.preempted_at is None  # it has run 60 s of its 600
    clock.advance(541)
    tick()
    resumed.refresh_from_db()
    assert resumed.preempted_at is not None


def test_a_victim_does_not_take_back_the_room_it_freed(alice, bob, make_task, fake_ray, clock, granted, settings):
    """best_effort_fifo lets a task that fits pass one that does not: the victim that stopped
    early would start again on its own room while the high task still waits for the other."""
    settings.ARGUS_SCHEDULING_POLICY = "best_effort_fifo"
    ray = fake_ray([4, 4])
    a = make_task(alice, PREEMPTIBLE, stall_timeout_s=None)
    running(ray, a, clock)
    b = make_task(alice, PREEMPTIBLE, stall_timeout_s=None)
    running(ray, b, clock)
    high = make_task(bob, TWO_NODES + "priority: high\n")
    tick()
    save_checkpoint(a, clock)  # a stops at once; b waits for its grace
    clock.advance(1)
    tick()
    ray.set_status(a.attempts.get().ray_submission_id, "STOPPED")
    tick()
    a.refresh_from_db()
    assert a.state == S.QUEUED and a.attempts.count() == 1
    assert "it made room for a task of higher priority" in a.pending_reason
    clock.advance(GRACE)
    tick()
    ray.set_status(b.attempts.get().ray_submission_id, "STOPPED")
    tick()
    high.refresh_from_db()
    assert high.state == S.SUBMITTED


def test_a_high_task_preemption_cannot_help_does_not_keep_the_next_from_its_turn():
    """Pure: the first high task needs 3 nodes of 8 (no victims can make that); the second needs
    one node's 4 GPUs, which a preemptible task holds."""
    totals = {"n0": Room(8, 40), "n1": Room(8, 40)}
    free = {"n0": Room(4, 28), "n1": Room(0, 16)}
    steady = Running(1, {"n1": 8}, 24.0, ends_at=None, user="alice", started_at=-100.0)
    victim = Running(2, {"n0": 4}, 12.0, ends_at=None, user="alice", preemptible=True, started_at=-50.0)
    huge = Request(10, 3, 8, 24.0, "bob", 3600.0, priority=10)
    small = Request(11, 1, 8, 24.0, "carol", 3600.0, priority=10)
    decision = decide(
        [huge, small], free, totals, policy="best_effort_fifo", now=0.0, running=[steady, victim], preemption=True
    )
    assert decision.preempt == {2: 11}


def test_a_task_backfilled_until_the_victims_stop_does_not_undo_the_preemption():
    """Pure (found by bench/policy_sim.py): bob's high task needs 8 GPUs; alice's victim stops at
    220; carol's 4-GPU task was backfilled and ends at 200. Once the victim is gone, the room is
    there: the preemption holds."""
    free = {"n0": Room(0, 0), "n1": Room(0, 0)}
    victim = Running(1, {"n0": 4}, 12.0, ends_at=220.0, user="alice", stopping=True)
    carol = Running(2, {"n1": 4}, 12.0, ends_at=200.0, user="carol")
    bob = Request(3, 2, 4, 12.0, "bob", 500.0, priority=10)
    assert preemption_holds(bob, [victim], free, [victim, carol]) == ""
    longer = Running(2, {"n1": 4}, 12.0, ends_at=900.0, user="carol")
    assert "would not fit" in preemption_holds(bob, [victim], free, [victim, longer])
    # bob's own short task counts against his one-task limit only until it ends.
    own = Running(2, {"n1": 4}, 12.0, ends_at=200.0, user="bob")
    assert preemption_holds(bob, [victim], free, [victim, own], {"bob": Caps(max_tasks=1)}) == ""


def test_only_a_waiting_tasks_latest_preemption_makes_it_yield(alice, bob, make_task, fake_ray, clock, granted):
    victim = make_task(alice, PREEMPTIBLE)
    high = make_task(bob, HIGH)
    old = Attempt.objects.create(
        task=victim, attempt_no=1, ray_submission_id="v--a01", failure_kind=FailureKind.PREEMPTED, preempted_for=high
    )
    assert yielded() == {victim.pk: high.pk}
    Attempt.objects.create(
        task=victim, attempt_no=2, ray_submission_id="v--a02", failure_kind=FailureKind.RUNTIME_ERROR
    )
    assert yielded() == {}  # it ran again since: that preemption is history
    assert old.preempted_for_id == high.pk
