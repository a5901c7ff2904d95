"""A sweep's life with a fake Ray: the cap (at most max_concurrent trials admitted, the others
WAITING with their reason, queued in trial order as places free up), the sweep's end and its
events and webhooks, a requeued trial reopening it. The real Ray: tests/scheduler/test_sweeps_on_ray.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from devkit.fake_ray import FakeRay
from tasks.choices import TERMINAL_STATES, EventKind, Role, SweepState, TaskState
from tasks.models import Event, Task, new_task_id
from tasks.pipelines import waiting as dependencies
from tasks.queue.reasons import PendingReason
from tasks.scheduler.tick import tick
from tasks.scheduler.turns import Budget
from tasks.sweeps import cap, lifecycle
from tasks.sweeps.actions import cancel_sweep
from tasks.sweeps.cap import release_trials
from tasks.sweeps.curves import refresh_trials
from tasks.sweeps.lifecycle import finish_sweeps, sweep_state_of
from tasks.sweeps.models import Sweep
from tasks.sweeps.summary import summarize
from tests.tasks.sweeps.test_trial_curves import sweep_of, trial, write_log
from webhooks.models import Delivery, Webhook

pytestmark = pytest.mark.django_db
S = TaskState
LR = "actor_rollout_ref.actor.optim.lr"
RATES = [1e-6, 3e-6, 1e-5, 3e-5, 1e-4]


def make_sweep(
    user: User, make_task: Callable[..., Task], trials: int, *, cap: int | None = 2, name: str = "lr-sweep"
) -> tuple[Sweep, list[Task]]:
    """A sweep as tasks.sweeps.actions submits one: the first ``cap`` trials QUEUED, the others
    WAITING with their reason. The trials are made last first, so that their pks run against
    their order: the cap's release must follow trial_index, not the pk."""
    sweep = Sweep.objects.create(
        sweep_id=new_task_id(user.username, "sweep"), user=user, name=name, document="{}", max_concurrent=cap
    )
    made: dict[int, Task] = {}
    for index in reversed(range(trials)):
        fields: dict[str, object] = {"sweep": sweep, "trial_index": index, "params": {LR: RATES[index]}}
        if cap is not None and index >= cap:
            reason = f"sweep {name or sweep.sweep_id}: {cap} of {cap} trials running"
            fields.update(state=S.WAITING, queued_at=None, pending_reason=reason)
        made[index] = make_task(user, **fields)
    return sweep, [made[index] for index in range(trials)]


def fresh(tasks: list[Task]) -> list[Task]:
    by_pk = Task.objects.select_related("pending").in_bulk([task.pk for task in tasks])
    return [by_pk[task.pk] for task in tasks]


def states(tasks: list[Task]) -> list[str]:
    return [task.state for task in fresh(tasks)]


def admitted(sweep: Sweep) -> int:
    return sweep.trials.exclude(state__in=(S.WAITING, *TERMINAL_STATES)).count()


def at(moment: datetime | None) -> datetime:
    assert moment is not None
    return moment


def end(ray: FakeRay, task: Task, status: str = "SUCCEEDED") -> None:
    attempt = Task.objects.get(pk=task.pk).attempts.get()
    ray.set_status(attempt.ray_submission_id, status, driver_exit_code=0 if status == "SUCCEEDED" else 1)


# --- The cap --------------------------------------------------------------------------------------


def test_at_most_max_concurrent_trials_are_admitted_and_an_ended_one_frees_its_place_in_trial_order(
    alice, make_task, fake_ray
):
    ray = fake_ray([4, 4, 4, 4])  # room for four trials: the cap, not the cluster, holds them
    sweep, trials = make_sweep(alice, make_task, 5, cap=2)
    tick()
    assert states(trials) == [S.SUBMITTED, S.SUBMITTED, S.WAITING, S.WAITING, S.WAITING]
    assert [t.pending_reason for t in fresh(trials)[2:]] == ["sweep lr-sweep: 2 of 2 trials running"] * 3
    end(ray, trials[1])  # the second ends first: the next in trial order takes its place
    tick()  # in one tick: the end is synced, trial 2 queued and admitted
    assert states(trials) == [S.SUBMITTED, S.SUCCEEDED, S.SUBMITTED, S.WAITING, S.WAITING]
    assert admitted(sweep) == 2
    queued = Task.objects.get(pk=trials[2].pk).events.get(kind=EventKind.STATE_TRANSITION, to_state=S.QUEUED)
    assert queued.message == "A place under its sweep's cap is free (2 of 2 trials running): queued."
    end(ray, trials[0], "FAILED")  # a failed trial frees its place too
    tick()
    assert states(trials) == [S.FAILED, S.SUCCEEDED, S.SUBMITTED, S.SUBMITTED, S.WAITING]
    assert fresh(trials)[4].pending_reason == "sweep lr-sweep: 2 of 2 trials running"
    assert len(ray.submitted) == 4 and admitted(sweep) == 2


def test_a_trial_admitted_but_not_yet_on_ray_holds_its_place(alice, bob, make_task, fake_ray):
    fake_ray([4])  # one trial's room: the other queued trial stays PENDING_RESOURCES, admitted all the same
    sweep, trials = make_sweep(alice, make_task, 3, cap=2)
    tick()
    assert sorted(states(trials)[:2]) == [S.PENDING_RESOURCES, S.SUBMITTED] and states(trials)[2] == S.WAITING
    # Canceling the one in the queue (not yet on Ray) frees a place: the waiting one is queued.
    pending = sweep.trials.get(state=S.PENDING_RESOURCES)
    assert pending.cancel("api:alice")
    tick()
    assert Task.objects.get(pk=trials[2].pk).state == S.PENDING_RESOURCES
    assert admitted(sweep) == 2


def test_the_reason_counts_the_admitted_trials_and_is_written_only_where_it_changed(alice, make_task):
    sweep, trials = make_sweep(alice, make_task, 4, cap=2, name="")
    Task.objects.get(pk=trials[0].pk).cancel("api:alice")  # a place frees: trial 2 is queued
    budget = Budget(60)
    release_trials(budget)
    assert states(trials) == [S.CANCELED, S.QUEUED, S.QUEUED, S.WAITING]
    # A sweep with no name is named by its id.
    assert fresh(trials)[3].pending_reason == f"sweep {sweep.sweep_id}: 2 of 2 trials running"
    Task.objects.filter(pk=trials[1].pk).update(state=S.RUNNING)
    PendingReason.objects.filter(task=trials[3]).update(text="stale")
    release_trials(budget)
    assert fresh(trials)[3].pending_reason == f"sweep {sweep.sweep_id}: 2 of 2 trials running"
    with CaptureQueriesContext(connection) as queries:
        release_trials(budget)  # nothing changed: nothing written
    assert len(queries) == 2, [q["sql"] for q in queries]
    assert not [q["sql"] for q in queries if PendingReason._meta.db_table in q["sql"] and "INSERT" in q["sql"]]


def test_its_reads_grow_with_the_running_sweeps_never_with_the_queue(alice, bob, make_task):
    for _ in range(20):
        make_task(bob)  # a queue of plain tasks, and WAITING tasks of no sweep
    make_sweep(alice, make_task, 4, cap=2)
    make_sweep(bob, make_task, 5, cap=1, name="other")
    with CaptureQueriesContext(connection) as queries:
        release_trials(Budget(60))  # every place taken: nothing to queue, every reason as it was
    assert len(queries) == 2  # the WAITING trials of the running sweeps; how many of theirs are admitted
    Sweep.objects.update(state=SweepState.FAILED)
    with CaptureQueriesContext(connection) as queries:
        release_trials(Budget(60))
    assert len(queries) == 1


def test_a_canceled_sweeps_waiting_trials_are_not_released(alice, make_task):
    sweep, trials = make_sweep(alice, make_task, 3, cap=1)
    Sweep.objects.filter(pk=sweep.pk).update(canceled_at=timezone.now())  # its cancel is under way
    Task.objects.get(pk=trials[0].pk).cancel("api:alice")
    release_trials(Budget(60))
    assert states(trials) == [S.CANCELED, S.WAITING, S.WAITING]


def test_a_sweep_canceled_after_the_release_read_it_has_no_trial_queued(alice, make_task, monkeypatch):
    # The exact point: the release has read the sweep's waiting trials (not canceled then), and
    # cancel_sweep has set canceled_at but not yet reached the waiting trial.
    sweep, trials = make_sweep(alice, make_task, 3, cap=1)
    Task.objects.get(pk=trials[0].pk).cancel("api:alice")  # a place frees
    read = cap.capped

    def read_then_cancel() -> dict[int, cap.Capped]:
        found = read()
        Sweep.objects.filter(pk=sweep.pk).update(canceled_at=timezone.now())
        return found

    monkeypatch.setattr(cap, "capped", read_then_cancel)
    release_trials(Budget(60))
    assert states(trials) == [S.CANCELED, S.WAITING, S.WAITING]
    assert not Event.objects.filter(task=trials[1], kind=EventKind.STATE_TRANSITION, to_state=S.QUEUED).exists()


def test_the_dependencies_leave_a_sweeps_waiting_trials_to_the_cap(alice, make_task):
    _, trials = make_sweep(alice, make_task, 3, cap=1)
    plain = make_task(alice, state=S.WAITING, queued_at=None)  # waits for nothing: the dependencies release it
    verdicts = dependencies.verdicts()
    assert set(verdicts) == {plain.pk}
    assert fresh(trials)[1].pending_reason == "sweep lr-sweep: 1 of 1 trials running"


def test_a_trial_that_ends_asks_for_a_tick_only_when_trials_wait(alice, make_task, monkeypatch):
    asked: list[bool] = []
    monkeypatch.setattr(lifecycle, "request_tick", lambda: asked.append(True))
    _, trials = make_sweep(alice, make_task, 3, cap=2)
    Task.objects.get(pk=trials[0].pk).cancel("api:alice")
    assert asked == [True]
    release_trials(Budget(60))  # trial 2 queued: none waits now
    Task.objects.get(pk=trials[1].pk).cancel("api:alice")
    assert asked == [True]


# --- The end --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trial_states", "canceled", "state"),
    [
        ([S.SUCCEEDED, S.FAILED, S.CANCELED], False, SweepState.SUCCEEDED),
        ([S.CANCELED, S.SUCCEEDED], True, SweepState.SUCCEEDED),  # a success outweighs a cancel
        ([S.FAILED, S.CANCELED], False, SweepState.FAILED),  # early-stopped trials are CANCELED
        ([S.FAILED, S.CANCELED], True, SweepState.CANCELED),
        ([S.SUCCEEDED, S.RUNNING], False, SweepState.RUNNING),
        ([S.SUCCEEDED, S.WAITING], True, SweepState.RUNNING),
    ],
)
def test_a_sweeps_state_from_its_trials(trial_states, canceled, state):
    assert sweep_state_of(trial_states, canceled=canceled) == state


def test_a_sweep_with_a_success_ends_succeeded_on_its_last_trials_end_and_the_webhook_says_so(
    alice, make_task, fake_ray
):
    ray = fake_ray([4, 4])
    Webhook.create(user=alice, url="https://hooks.example.org/x", events=["SWEEP_SUCCEEDED", "SWEEP_FAILED"])
    sweep, trials = make_sweep(alice, make_task, 3, cap=2)
    tick()
    end(ray, trials[0], "FAILED")
    end(ray, trials[1])
    tick()
    sweep.refresh_from_db()
    assert sweep.state == SweepState.RUNNING and sweep.finished_at is None
    end(ray, trials[2], "FAILED")
    tick()
    sweep.refresh_from_db()
    assert sweep.state == SweepState.SUCCEEDED
    assert sweep.finished_at is not None and sweep.finished_at >= at(Task.objects.get(pk=trials[2].pk).finished_at)
    event = Event.objects.get(kind__in=(EventKind.SWEEP_SUCCEEDED, EventKind.SWEEP_FAILED))
    assert (event.kind, event.task_id) == (EventKind.SWEEP_SUCCEEDED, trials[2].pk)  # the trial that ended it
    assert event.data == {"sweep_id": sweep.sweep_id, "state": "SUCCEEDED", "succeeded": 1, "trials": 3}
    body = json.loads(Delivery.objects.get(event=event).body)
    assert (body["event"], body["state"], body["sweep_id"], body["task_id"]) == (
        "SWEEP_SUCCEEDED",
        "SUCCEEDED",
        sweep.sweep_id,
        trials[2].task_id,
    )
    assert body["text"].startswith(f"Argus: sweep {sweep.sweep_id} succeeded (its trial <")
    finish_sweeps("scheduler")  # the tick's check ends nothing twice
    assert Event.objects.filter(kind=EventKind.SWEEP_SUCCEEDED).count() == 1


def test_a_sweep_with_no_success_fails_and_a_trials_own_webhook_carries_the_sweep_id(alice, make_task, fake_ray):
    ray = fake_ray([4, 4])
    Webhook.create(user=alice, url="https://hooks.example.org/x", events=["FAILED", "SWEEP_FAILED"])
    sweep, trials = make_sweep(alice, make_task, 2, cap=2)
    tick()
    Task.objects.filter(pk=trials[1].pk).update(early_stopped=True)
    Task.objects.get(pk=trials[1].pk).cancel("scheduler")  # early stopping's cancel, once Ray stops it
    ray.set_status(trials[1].attempts.get().ray_submission_id, "STOPPED")
    end(ray, trials[0], "FAILED")
    tick()
    sweep.refresh_from_db()
    assert states(trials) == [S.FAILED, S.CANCELED] and sweep.state == SweepState.FAILED
    bodies = {d.event_name: json.loads(d.body) for d in Delivery.objects.all()}
    assert set(bodies) == {"FAILED", "SWEEP_FAILED"}
    assert bodies["FAILED"]["sweep_id"] == sweep.sweep_id and bodies["FAILED"]["state"] == "FAILED"
    assert bodies["SWEEP_FAILED"]["state"] == "FAILED"


def test_a_canceled_sweep_ends_canceled_with_no_event(alice, make_task):
    Webhook.create(user=alice, url="https://hooks.example.org/x", events=["SWEEP_SUCCEEDED", "SWEEP_FAILED"])
    sweep, trials = make_sweep(alice, make_task, 3, cap=1)
    Sweep.objects.filter(pk=sweep.pk).update(canceled_at=timezone.now())
    for task in trials:
        Task.objects.get(pk=task.pk).cancel("api:alice")
    sweep.refresh_from_db()
    assert sweep.state == SweepState.CANCELED and sweep.finished_at is not None
    assert not Event.objects.filter(kind__in=(EventKind.SWEEP_SUCCEEDED, EventKind.SWEEP_FAILED)).exists()
    assert not Delivery.objects.exists()


def test_the_ticks_check_ends_a_sweep_whose_last_trial_ended_unseen(alice, make_task):
    """Two last trials ending at once on PostgreSQL each miss the other's end: the tick ends it."""
    sweep, trials = make_sweep(alice, make_task, 2, cap=None)
    now = timezone.now()
    Task.objects.filter(pk=trials[0].pk).update(state=S.FAILED, finished_at=now + timedelta(seconds=1))
    Task.objects.filter(pk=trials[1].pk).update(state=S.FAILED, finished_at=now)
    finish_sweeps("scheduler")
    sweep.refresh_from_db()
    assert sweep.state == SweepState.FAILED
    event = Event.objects.get(kind=EventKind.SWEEP_FAILED)
    assert event.task_id == trials[0].pk  # the one that ended last


def test_a_requeued_trial_reopens_its_sweep_and_waits_for_a_place(alice, make_task, fake_ray):
    fake_ray([4, 4])
    sweep, trials = make_sweep(alice, make_task, 3, cap=1)
    Sweep.objects.filter(pk=sweep.pk).update(canceled_at=timezone.now())
    for task in trials:
        Task.objects.get(pk=task.pk).cancel("api:alice")
    sweep.refresh_from_db()
    assert sweep.state == SweepState.CANCELED
    Task.objects.get(pk=trials[2].pk).requeue("admin:root")
    Task.objects.get(pk=trials[1].pk).requeue("admin:root")
    sweep.refresh_from_db()
    assert (sweep.state, sweep.finished_at, sweep.canceled_at) == (SweepState.RUNNING, None, None)
    assert states(trials) == [S.CANCELED, S.WAITING, S.WAITING]
    requeued = Task.objects.get(pk=trials[1].pk).events.last()
    assert requeued is not None and requeued.message.endswith("It waits for a place under its sweep's cap.")
    tick()  # one place: the first in trial order
    assert states(trials) == [S.CANCELED, S.SUBMITTED, S.WAITING]
    assert fresh(trials)[2].pending_reason == "sweep lr-sweep: 1 of 1 trials running"


def test_a_requeued_trial_of_a_sweep_with_no_cap_is_queued_at_once(alice, make_task):
    sweep, trials = make_sweep(alice, make_task, 2, cap=None)
    for task in trials:
        Task.objects.get(pk=task.pk).cancel("api:alice")
    Task.objects.get(pk=trials[0].pk).requeue("admin:root")
    sweep.refresh_from_db()
    assert sweep.state == SweepState.RUNNING and states(trials) == [S.QUEUED, S.CANCELED]


def test_a_sweep_ends_only_once_its_last_trials_final_curve_is_read(alice, make_task):
    # The last trial's end (sync, in the tick) comes before the tick's curve pass reads its last
    # steps: its last validation, here the sweep's best value, must be in the sweep's best trial
    # and behind what a SWEEP_SUCCEEDED receiver reads, so the sweep ends after that read.
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {0: 0.2, 10: 0.5}, 12, state=S.SUCCEEDED)
    last = trial(make_task, alice, sweep, {0: 0.2, 4: 0.3}, 6)
    refresh_trials(Budget(60))  # both read: the first's end, the last's steps so far
    write_log(last, last.attempts.get(), {0: 0.2, 4: 0.3, 8: 0.4, 12: 0.9}, 12)
    last.transition(S.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler", message="Ray says it succeeded.")
    sweep.refresh_from_db()
    assert sweep.state == SweepState.RUNNING  # its last read is due
    assert not Event.objects.filter(kind=EventKind.SWEEP_SUCCEEDED).exists()
    refresh_trials(Budget(60))  # the tick's order: the curve pass, then release's finish_sweeps
    finish_sweeps("scheduler")
    sweep.refresh_from_db()
    assert sweep.state == SweepState.SUCCEEDED
    best = summarize(sweep).best_trial
    assert best is not None and (best.task_id, best.best_value) == (last.task_id, 0.9)
    ended = Event.objects.get(kind=EventKind.SWEEP_SUCCEEDED)
    assert ended.task_id == last.pk and ended.data["succeeded"] == 2


def test_a_sweep_whose_trials_never_ran_ends_at_once_when_canceled(alice, make_task):
    sweep = sweep_of(alice)
    waiting = make_task(alice, sweep=sweep, trial_index=0, params={"lr": 0}, state=S.WAITING, queued_at=None)
    cancel_sweep(sweep, "api:alice")
    sweep.refresh_from_db()
    assert (sweep.state, Task.objects.get(pk=waiting.pk).state) == (SweepState.CANCELED, S.CANCELED)
