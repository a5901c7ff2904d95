"""The scheduler's copy of the queue (tasks.queue.rows): kept between ticks, each tick
reads only what changed, and every way a queued task changes reaches the next tick."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tasks.choices import TaskState
from tasks.models import Task
from tasks.queue import rows as queue_rows
from tasks.queue.fairshare import Waiting
from tasks.queue.request import Request
from tasks.queue.rows import Queued
from tasks.scheduler.tick import tick

pytestmark = pytest.mark.django_db


def rows() -> dict[int, queue_rows.QueueRow]:
    return queue_rows.read(timezone.now())


def test_the_copy_matches_a_whole_read_after_every_kind_of_change(alice, bob, make_task, fake_ray, admin):
    fake_ray([1])  # room for nothing that is made here: they all wait
    tasks = [make_task(alice) for _ in range(3)]
    tick()
    assert set(rows()) == {t.pk for t in tasks}

    # A new task, a canceled one (out of the queue), a cancel request left pending on one that
    # a scheduler has in hand, a priority changed by the admin, a task deleted.
    new = make_task(bob)
    tasks[0].cancel("alice")
    Task.objects.filter(pk=tasks[1].pk).update(state=TaskState.PENDING_RESOURCES, updated_at=timezone.now())
    edited = Task.objects.get(pk=tasks[2].pk)
    edited.priority = "high"
    edited.save(update_fields=["priority"])
    kept = rows()
    whole = {row.pk: row for row in queue_rows._query(None)}
    assert kept == whole
    assert tasks[0].pk not in kept and new.pk in kept
    assert kept[tasks[1].pk].state == TaskState.PENDING_RESOURCES
    assert kept[tasks[2].pk].priority_rank == whole[tasks[2].pk].priority_rank != tasks[2].priority_rank

    Task.objects.filter(pk=new.pk).delete()  # no updated_at tells of it: the count does
    assert rows() == {row.pk: row for row in queue_rows._query(None)}


def test_each_tick_reads_only_what_changed(alice, make_task, fake_ray, monkeypatch):
    fake_ray([1])
    tasks = [make_task(alice) for _ in range(30)]
    tick()
    reads: list[tuple[bool, int]] = []
    query = queue_rows._query

    def spy(since):
        result = query(since)
        reads.append((since is None, len(result)))
        return result

    monkeypatch.setattr(queue_rows, "_query", spy)
    # Past the overlap: the next read asks only for what changed since the last one.
    later = timezone.now() + timedelta(seconds=queue_rows.OVERLAP_S + 1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    tick()
    tick()
    assert reads[-1] == (False, 0)
    tasks[0].cancel("alice")
    tick()
    assert reads[-1] == (False, 1)
    assert not any(whole for whole, _ in reads)
    assert tasks[0].pk not in rows()


def test_a_change_that_commits_late_with_an_earlier_time_is_still_read(alice, make_task, fake_ray):
    fake_ray([1])
    task = make_task(alice)
    rows()
    # A transaction of another process stamped its change before this process's last read began,
    # and committed after it: the overlap reads it.
    earlier = timezone.now() - timedelta(seconds=queue_rows.OVERLAP_S / 2)
    Task.objects.filter(pk=task.pk).update(priority_rank=7, updated_at=earlier)
    assert rows()[task.pk].priority_rank == 7


def test_reasons_the_scheduler_wrote_are_in_the_copy_and_ray_down_reasons_are_read_back(
    alice, make_task, fake_ray, monkeypatch
):
    from tasks.scheduler.rayjobs import RayJobs, RayUnavailable

    fake_ray([1])
    task = make_task(alice)
    tick()
    task.refresh_from_db()
    assert rows()[task.pk].pending_reason == task.pending_reason != ""

    def down(cls):
        raise RayUnavailable("connection refused")

    with monkeypatch.context() as patch:
        patch.setattr(RayJobs, "connect", classmethod(down))
        tick()
    assert rows()[task.pk].pending_reason.startswith("Ray is unreachable")
    tick()  # Ray is back: the reason it waits for is written again, not kept from before
    task.refresh_from_db()
    assert task.pending_reason.startswith("needs 1 node with 4 free GPUs"), task.pending_reason


def test_a_task_in_its_retry_backoff_or_with_a_cancel_pending_is_kept_but_not_due(alice, make_task, fake_ray):
    fake_ray([1])
    later, canceling, due = (make_task(alice) for _ in range(3))
    now = timezone.now()
    Task.objects.filter(pk=later.pk).update(next_run_at=now + timedelta(minutes=5), updated_at=now)
    Task.objects.filter(pk=canceling.pk).update(cancel_requested_at=now, updated_at=now)
    kept = rows()
    assert set(kept) == {later.pk, canceling.pk, due.pk}
    names = {alice.pk: alice.username}
    assert list(queue_rows.due(now, names, 3.0).by_pk) == [due.pk]
    assert set(queue_rows.due(now + timedelta(minutes=6), names, 3.0).by_pk) == {later.pk, due.pk}


def fresh_due(now, names: dict[int, str], cpus: float) -> queue_rows.Due:
    """The due tasks as a scheduler that just started makes them: the whole queue read anew."""
    kept = queue_rows._copy
    queue_rows.forget()
    try:
        queue_rows.read(now)
        return queue_rows.due(now, names, cpus)
    finally:
        queue_rows._copy = kept


def due_matching_a_fresh_one(now, names: dict[int, str], cpus: float = 3.0) -> queue_rows.Due:
    queue_rows.read(now)
    kept = queue_rows.due(now, names, cpus)
    fresh = fresh_due(now, names, cpus)
    assert kept.by_pk == fresh.by_pk
    assert sorted(kept.waiting) == sorted(fresh.waiting)
    assert kept.requests == [kept.by_pk[item.key].request for item in kept.waiting]
    assert (kept.reasons, kept.queued) == (fresh.reasons, fresh.queued)
    return kept


def test_the_due_tasks_kept_between_ticks_match_fresh_ones_after_every_kind_of_change(
    alice, bob, make_task, fake_ray, settings
):
    ray = fake_ray([4, 1])
    tasks = [make_task(user) for user in (alice, bob, alice, bob)]
    tick()  # one starts; the others wait with their reasons, moved to PENDING_RESOURCES or not
    names = {alice.pk: alice.username, bob.pk: bob.username}
    now = timezone.now()
    due = due_matching_a_fresh_one(now, names)
    assert queue_rows.due(now, names, 3.0) is due  # nothing changed: the same, nothing made anew

    # An order of this tick's own: its requests follow it, and it is what the next tick starts from.
    reversed_order = list(reversed(due.waiting))
    assert [request.key for request in due.keep_order(reversed_order)] == [item.key for item in reversed_order]
    assert due.keep_order(list(reversed_order)) is due.requests  # the same order: nothing made anew

    # A new task, a priority changed by the admin, a retry's backoff, a task canceled.
    new = make_task(alice)
    edited = Task.objects.get(pk=tasks[1].pk)
    edited.priority = "high"
    edited.save(update_fields=["priority"])
    Task.objects.filter(pk=tasks[2].pk).update(next_run_at=now + timedelta(minutes=5), updated_at=timezone.now())
    tasks[3].cancel("bob")
    now = timezone.now()
    due = due_matching_a_fresh_one(now, names)
    assert [item.key for item in due.waiting] == [item.key for item in reversed_order if item.key in due.by_pk] + [
        new.pk
    ]  # the last order first, the new task after
    assert tasks[2].pk not in due.by_pk and tasks[3].pk not in due.by_pk
    assert due_matching_a_fresh_one(now + timedelta(minutes=6), names).by_pk.keys() >= {tasks[2].pk}

    # Reasons the scheduler writes and tasks it moves (room frees up; the started task ends).
    ray.nodes[1].ray_gpus_free = ray.nodes[1].gpus_total = 4.0
    tick()
    due_matching_a_fresh_one(timezone.now(), names)

    # A user renamed, and another CPUs-per-GPU setting: what admission reads of each task follows.
    alice.username = "alice2"
    alice.save(update_fields=["username"])
    names = {alice.pk: "alice2", bob.pk: bob.username}
    due = due_matching_a_fresh_one(timezone.now(), names, cpus=2.0)
    assert {request.user for request in due.requests} <= {"alice2", "bob"}
    assert {request.cpus_per_node for request in due.requests} == {8.0}
    Task.objects.filter(pk=new.pk).delete()
    assert new.pk not in due_matching_a_fresh_one(timezone.now(), names, cpus=2.0).by_pk


def test_a_due_task_is_made_with_every_field_the_order_and_admission_read(alice, make_task):
    # due() and request_for make their named tuples with tuple.__new__ (their own __new__ is a
    # Python call, 30,000 of them on a first tick): each must hold every field, in order.
    task = make_task(alice)  # PPO on 1 node x 4 GPUs
    names = {alice.pk: alice.username}
    queue_rows.read(timezone.now())
    queued = queue_rows.due(timezone.now(), names, 3.0).by_pk[task.pk]
    assert queued == Queued(queued.row, *queued[1:])
    assert queued.waiting == Waiting(task.pk, "alice", task.priority_rank, queued.row.submitted)
    assert queued.request == Request(task.pk, 1, 4, 12.0, "alice", None, task.priority_rank, (), (), "")
    assert len(queued.request) == len(Request._fields)
