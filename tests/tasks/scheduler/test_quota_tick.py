"""Admission by quota through the tick (tasks.scheduler.launch.admit) with a fake Ray and time
moved by hand: the group and quota each attempt records, the reason a task waits for its group,
the group of the users without one, the reclaim marked for an in-quota task, and its withdrawal
when that task would not start."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.groups.models import QuotaGroup
from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind, Quota, TaskState
from tasks.models import Task
from tasks.scheduler.launch import live_holdings, running_now
from tasks.scheduler.tick import tick
from tests.accounts.groups.conftest import make_group as make_group  # the groups' own fixture
from tests.tasks.scheduler.test_preemption import save_checkpoint
from tests.tasks.scheduler.test_watch import running, stopped_by_argus

pytestmark = pytest.mark.django_db
S = TaskState
NOTHING_IDLE = "nothing idle to borrow in other groups' quotas (their lend limits)"


def admitted(task: Task) -> Attempt:
    return Attempt.objects.select_related("group").get(task=task)


def test_attempts_record_the_group_and_whether_they_borrow(alice, bob, make_task, fake_ray, make_group):
    make_group("vision", alice, nominal_gpus=4)
    make_group("nlp", bob, nominal_gpus=4)
    fake_ray([4, 4])
    first, second, third = make_task(alice), make_task(alice), make_task(alice)
    tick()
    # Two of one group in one tick, counted together: the second borrows nlp's idle quota.
    one, two = admitted(first), admitted(second)
    assert one.group is not None and two.group is not None
    assert (one.group.name, one.quota) == ("vision", Quota.IN_QUOTA)
    assert (two.group.name, two.quota) == ("vision", Quota.BORROWED)
    assert first.events.get(kind=EventKind.STATE_TRANSITION, to_state=S.SUBMITTING).message == (
        "Admitted: 4 GPUs on 1 node(s); in the quota of group vision."
    )
    moved = second.events.get(kind=EventKind.STATE_TRANSITION, to_state=S.SUBMITTING)
    assert moved.message == "Admitted: 4 GPUs on 1 node(s); borrowed: beyond the quota of group vision."
    assert (moved.data["group"], moved.data["quota"]) == ("vision", "borrowed")
    third.refresh_from_db()
    # It waits for its group, not for room: still QUEUED, the reason names the group and numbers.
    assert third.state == S.QUEUED
    assert third.pending_reason == f"group vision: 8 of 4 GPUs in use, {NOTHING_IDLE} (this task needs 4)"


def test_the_borrow_limit_holds_a_task_and_not_the_others(alice, bob, make_task, fake_ray, make_group):
    make_group("vision", alice, nominal_gpus=4, borrow_limit_gpus=0)
    make_group("nlp", bob, nominal_gpus=4)
    fake_ray([4, 4])
    mine, more, theirs = make_task(alice), make_task(alice), make_task(bob)
    tick()
    more.refresh_from_db()
    assert more.pending_reason == "group vision: 4 of 4 GPUs in use, borrowing limited to 0 (this task needs 4)"
    assert admitted(mine).quota == admitted(theirs).quota == Quota.IN_QUOTA


def test_the_users_without_a_group_share_what_no_quota_covers(alice, bob, make_task, fake_ray, make_group):
    make_group("vision", alice, nominal_gpus=4, lend_limit_gpus=0)
    fake_ray([4, 4])
    first, second = make_task(bob), make_task(bob)  # bob is in no group: the other 4 GPUs
    tick()
    attempt = admitted(first)
    assert (attempt.group, attempt.quota) == (None, Quota.IN_QUOTA)
    assert first.events.get(kind=EventKind.STATE_TRANSITION, to_state=S.SUBMITTING).message == (
        "Admitted: 4 GPUs on 1 node(s)."
    )
    second.refresh_from_db()
    assert second.pending_reason == f"users without a group: 4 of 4 GPUs in use, {NOTHING_IDLE} (this task needs 4)"


def test_without_groups_admission_is_as_it_was(alice, make_task, fake_ray):
    fake_ray([4, 4])
    tasks = [make_task(alice) for _ in range(3)]
    tick()
    assert [(a.group, a.quota) for a in Attempt.objects.order_by("pk")] == [(None, Quota.IN_QUOTA)] * 2
    tasks[2].refresh_from_db()
    assert tasks[2].state == S.PENDING_RESOURCES
    assert "free GPUs" in tasks[2].pending_reason


def test_per_user_limits_still_apply_inside_a_group(alice, bob, make_task, fake_ray, make_group):
    from accounts.limits import set_limits

    make_group("vision", alice, bob, nominal_gpus=8)
    set_limits(alice, actor="test", max_running_gpus=4)
    fake_ray([4, 4])
    mine, more, theirs = make_task(alice), make_task(alice), make_task(bob)
    tick()
    more.refresh_from_db()
    assert "alice has 4 GPUs in use" in more.pending_reason
    assert admitted(mine).quota == admitted(theirs).quota == Quota.IN_QUOTA


def test_the_tick_reads_the_groups_once(alice, bob, make_task, fake_ray, make_group):
    """The groups' rows are read once a tick, with their members (for the order and for
    admission): a tick's queries do not depend on the queue's length, with groups or not."""
    make_group("vision", alice, nominal_gpus=4)
    make_group("nlp", bob, nominal_gpus=4)
    fake_ray([4, 4])
    for _ in range(3):
        make_task(alice)
    tick()
    tick()  # steady: nothing changes

    def steady_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            tick()
        return sum('FROM "accounts_quotagroup"' in query["sql"] for query in queries.captured_queries)

    assert steady_queries() == 1
    for _ in range(20):
        make_task(bob)
    tick()
    assert steady_queries() == 1


# --- reclaim through the tick --------------------------------------------------------------


def borrowed_both_nodes(alice, bob, make_task, fake_ray, clock, make_group):
    """alice (nlp, no quota of its own) runs two tasks on both nodes, borrowing vision's idle
    quota; the first saves a checkpoint every 5 minutes, the last a minute ago, the second none
    in its 10 minutes."""
    make_group("nlp", alice, nominal_gpus=0)
    vision = make_group("vision", bob, nominal_gpus=8)
    ray = fake_ray([4, 4])
    older = make_task(alice, stall_timeout_s=None)
    newer = make_task(alice, stall_timeout_s=None)
    first = running(ray, older, clock)
    second = Attempt.objects.get(task=newer)
    ray.set_status(second.ray_submission_id, "RUNNING", start_time=int(clock.now.timestamp() * 1000))
    tick()  # both run from now
    assert first.quota == second.quota == Quota.BORROWED
    for wait in (240, 300):  # every 300 s: the next is due in 240 s
        clock.advance(wait)
        save_checkpoint(older, clock)
        tick()  # the watch notes it
    clock.advance(60)
    tick()
    return ray, vision, older, newer


def test_an_in_quota_task_reclaims_the_borrowed_task_losing_least(alice, bob, make_task, fake_ray, clock, make_group):
    _, _, older, newer = borrowed_both_nodes(alice, bob, make_task, fake_ray, clock, make_group)
    holders = {holder.key: holder for holder in running_now(timezone.now(), live_holdings())}
    assert holders[older.pk].group == "nlp" and holders[older.pk].borrowed
    assert holders[older.pk].checkpoint_at == clock.now.timestamp() - 60
    owner = make_task(bob)
    tick()
    victim = Attempt.objects.get(task=older)
    # older: 4 GPUs x 60 s since its checkpoint; newer: 4 x 600 s since its start (none yet).
    assert victim.reclaim and victim.preempted_for_id == owner.pk and victim.preempted_at == clock.now
    assert Attempt.objects.get(task=newer).preempted_at is None
    assert older.events.filter(kind=EventKind.RECLAIMED).exists()
    owner.refresh_from_db()
    assert owner.pending_reason.endswith("; reclaiming 1 borrowed task of other groups to make room")
    tick()  # the next tick waits for it, reclaims nothing more
    assert Attempt.objects.get(task=newer).preempted_at is None
    owner.refresh_from_db()
    assert owner.pending_reason.endswith("; waiting for 1 task being stopped")


def test_a_reclaim_is_withdrawn_once_its_task_would_not_start_in_its_quota(
    alice, bob, make_task, fake_ray, clock, make_group
):
    _, vision, older, _ = borrowed_both_nodes(alice, bob, make_task, fake_ray, clock, make_group)
    make_task(bob)
    tick()
    assert Attempt.objects.get(task=older).reclaim
    # The admin takes vision's quota away (and any borrowing): bob's task would not start now.
    QuotaGroup.objects.filter(pk=vision.pk).update(nominal_gpus=0, borrow_limit_gpus=0)
    tick()
    attempt = Attempt.objects.get(task=older)
    assert (attempt.preempted_at, attempt.reclaim) == (None, False)
    withdrawn = older.events.filter(kind=EventKind.RECLAIMED, data__withdrawn=True).get()
    assert withdrawn.message == (
        "Reclaim withdrawn: its group's quota holds the task it made room for back (group vision: 0 of 0 "
        "GPUs in use, borrowing limited to 0 (this task needs 4)); it runs on."
    )


def test_a_task_that_resumed_after_a_reclaim_is_not_reclaimed_again_before_its_minimum_run(
    alice, bob, make_task, fake_ray, clock, make_group, settings
):
    settings.ARGUS_PREEMPT_MIN_RUN_S = 600
    make_group("nlp", alice, nominal_gpus=0)
    make_group("vision", bob, nominal_gpus=4)
    ray = fake_ray([4])
    borrower = make_task(alice, stall_timeout_s=None)
    first = running(ray, borrower, clock)
    owner = make_task(bob)
    tick()  # reclaimed: no checkpoint is due, so it stops at once
    tick()
    stopped_by_argus(ray, borrower, first)
    assert Attempt.objects.get(pk=first.pk).failure_kind == FailureKind.RECLAIMED
    # bob's task took the node; canceled, it gives it back, and alice's resumes, borrowed again.
    tick()
    Task.objects.get(pk=owner.pk).cancel(actor="api:bob")
    tick()
    stopped = Attempt.objects.get(task=owner).ray_submission_id
    assert ray.stopped[-1] == stopped
    ray.set_status(stopped, "STOPPED")
    tick()
    second = Attempt.objects.get(task=borrower, attempt_no=2)
    assert second.quota == Quota.BORROWED
    ray.set_status(second.ray_submission_id, "RUNNING", start_time=int(clock.now.timestamp() * 1000))
    tick()
    again = make_task(bob)
    clock.advance(599)
    tick()
    assert Attempt.objects.get(pk=second.pk).preempted_at is None
    again.refresh_from_db()
    assert "reclaiming" not in again.pending_reason
    clock.advance(1)
    tick()
    assert Attempt.objects.get(pk=second.pk).reclaim


def test_a_group_counts_its_attempts_gpus_not_the_room_they_hold_while_others_settle(
    alice, make_task, fake_ray, make_group
):
    make_group("vision", alice, nominal_gpus=8, borrow_limit_gpus=0)
    fake_ray([4, 4, 4])
    first, second = make_task(alice), make_task(alice)
    tick()
    placed, waiting = admitted(first), admitted(second)
    # Ray put the first elsewhere than promised; the second is not placed yet: until it is, the
    # first holds both (launch.held_nodes), but its group uses 4 GPUs of it, not 8.
    elsewhere = next(node for node in ("n0", "n1", "n2") if node not in placed.placement | waiting.placement)
    Attempt.objects.filter(pk=placed.pk).update(nodes={elsewhere: 4})
    holder = next(h for h in running_now(timezone.now(), live_holdings()) if h.key == first.pk)
    assert (holder.gpus, holder.quota_gpus) == (8, 4)
    third = make_task(alice)
    tick()
    third.refresh_from_db()
    assert third.pending_reason == "group vision: 8 of 8 GPUs in use, borrowing limited to 0 (this task needs 4)"


def test_the_room_a_reclaim_took_back_goes_to_its_task_before_a_borrower_ahead_of_it(
    alice, bob, make_task, fake_ray, clock, make_group
):
    # The quotas cover more than the cluster: nlp's 4 GPUs, no member running, are idle on paper
    # and lent. Vision runs its 4 and borrows 4 more; its next task, ahead of rl's in the queue,
    # may borrow nlp's 4 but has no room. Rl's task, within its nominal, takes vision's borrowed
    # node back. Once that node is free, vision's next task could borrow it (nlp's quota, not
    # rl's, which is owed): started there, rl would reclaim it in the next tick, and so on.
    make_group("vision", alice, nominal_gpus=4)
    make_group("rl", bob, nominal_gpus=4)
    make_group("nlp", nominal_gpus=4)
    ray = fake_ray([4, 4])
    running(ray, make_task(alice, time_limit_s=36_000, stall_timeout_s=None), clock)
    lent = make_task(alice, time_limit_s=36_000, stall_timeout_s=None)
    victim = running(ray, lent, clock)
    assert victim.quota == Quota.BORROWED
    ahead = make_task(alice, time_limit_s=3_600, stall_timeout_s=None)
    owner = make_task(bob, time_limit_s=3_600, stall_timeout_s=None)
    tick()  # reclaimed for rl's task: no checkpoint is due, so it stops at once
    tick()
    assert Attempt.objects.get(pk=victim.pk).preempted_for_id == owner.pk
    stopped_by_argus(ray, lent, victim)
    assert Attempt.objects.get(pk=victim.pk).failure_kind == FailureKind.RECLAIMED
    for _ in range(3):  # the room goes to rl's task, and stays there
        tick()
        assert not ahead.attempts.exists()
        assert admitted(owner).quota == Quota.IN_QUOTA
        assert not Attempt.objects.filter(reclaim=True).exclude(pk=victim.pk).exists()
