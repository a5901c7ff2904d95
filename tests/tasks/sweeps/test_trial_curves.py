"""The tick's pass over sweeps' trials (tasks.sweeps.curves): each trial's curve of the metric
read from verl's file logger as the metrics API reads it, again only when its logged step moved
and once after it ended, within the tick's budget; the losers at each rung stopped at once, and
the races around that stop (the trial ending, a person's cancel, a second tick) decided by one
claim."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from tasks.attempts import Attempt
from tasks.choices import EventKind, SweepState, TaskState
from tasks.jobfiles import metrics_log, task_curves
from tasks.models import Task, new_task_id
from tasks.scheduler.storage import bounded
from tasks.scheduler.tick import tick
from tasks.scheduler.turns import Budget
from tasks.sweeps import curves
from tasks.sweeps.curves import due_trials, refresh_trials
from tasks.sweeps.early_stop import judge
from tasks.sweeps.lifecycle import AFTER_END
from tasks.sweeps.models import RungValue, Sweep, TrialCurve
from tests.tasks.attempt_data import attempt_of
from tests.tasks.scheduler.test_watch import log, running

pytestmark = pytest.mark.django_db

METRIC = "val-core/openai/gsm8k/reward/mean@1"


def sweep_of(user, **fields: object) -> Sweep:
    values: dict[str, object] = {
        "sweep_id": new_task_id(user.username, "sweep"),
        "user": user,
        "name": "lr-sweep",
        "document": "name: lr-sweep\n",
        "metric": METRIC,
        "mode": "max",
        "early_stop": {"min_steps": 10, "eta": 2},
        **fields,
    }
    return Sweep.objects.create(**values)


def write_log(task: Task, attempt: Attempt, validations: dict[int, float], last: int) -> None:
    """verl's file logger as a run writes it: a record per step (training metrics), the step's
    validation in the same record at the steps in ``validations`` (step 0: before training)."""
    records = []
    for step in range(0 if 0 in validations else 1, last + 1):
        data: dict[str, float] = {} if step == 0 else {"critic/score/mean": 0.5, "actor/pg_loss": -0.001}
        if step in validations:
            data[METRIC] = validations[step]
        records.append(json.dumps({"step": step, "data": data}))
    path = metrics_log(task, attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(records) + "\n")


def trial(
    make_task,
    user,
    sweep: Sweep,
    validations: dict[int, float],
    last: int,
    *,
    state: str = TaskState.RUNNING,
    logged: int | None = None,
) -> Task:
    """A trial whose single attempt logged steps up to ``last`` (``logged``: what the watch has
    seen of them so far), ended just now when ``state`` is terminal."""
    index = sweep.trials.count()
    ended = {"finished_at": timezone.now()} if state in (TaskState.SUCCEEDED, TaskState.FAILED) else {}
    task = make_task(user, sweep=sweep, trial_index=index, params={"lr": index}, state=state, **ended)
    attempt = attempt_of(task, 4, last_step=last if logged is None else logged)
    write_log(task, attempt, validations, last)
    return Task.objects.get(pk=task.pk)


def refresh(now: datetime | None = None) -> int:
    return refresh_trials(Budget(60), now)


def later() -> datetime:
    """When a running trial's curve is read again though it reached no rung."""
    return timezone.now() + curves.REFRESH_EVERY


def early_stops(task: Task) -> list[dict]:
    return list(task.events.filter(kind=EventKind.EARLY_STOPPED).values_list("data", flat=True))


def rung_values(sweep: Sweep) -> list[tuple[str, int, int, float]]:
    rows = RungValue.objects.filter(sweep=sweep).order_by("rung", "task_id")
    return [(row.task.task_id, row.rung, row.step, row.value) for row in rows]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The ids of the trials whose curves were read, in order (the metrics API's reading)."""
    seen: list[str] = []

    def counted(task, attempts):
        seen.append(task.task_id)
        return task_curves(task, attempts)

    monkeypatch.setattr("tasks.sweeps.curves.task_curves", counted)
    yield seen


def after_read(monkeypatch: pytest.MonkeyPatch, trial: Task, hook: Callable[[], None]) -> None:
    """Run ``hook`` once, right after ``trial``'s curve was read (before it is judged), in the
    tick's thread (the read itself runs on a storage thread: tasks.scheduler.storage)."""
    done: list[bool] = []

    def then(call, task, *args):
        read = bounded(call, task, *args)
        if task.pk == trial.pk and not done:
            done.append(True)
            hook()
        return read

    monkeypatch.setattr("tasks.sweeps.curves.bounded", then)


def test_it_keeps_a_running_trials_curve_of_the_metric(alice, make_task) -> None:
    sweep = sweep_of(alice)
    task = trial(make_task, alice, sweep, {0: 0.2, 4: 0.3, 8: 0.4}, 9)
    assert refresh() == 0
    curve = TrialCurve.objects.get(task=task)
    assert curve.points == [[0, 0.2], [4, 0.3], [8, 0.4]]
    assert curve.read_step == 9
    assert curve.read_at is not None
    assert not RungValue.objects.exists()  # below the first rung (10)


def test_a_curve_is_read_again_only_when_the_logged_step_moves_on(alice, make_task, reads) -> None:
    sweep = sweep_of(alice)
    task = trial(make_task, alice, sweep, {0: 0.2, 4: 0.3}, 6)
    refresh()
    refresh(later())
    assert reads == [task.task_id]
    attempt = task.attempts.get()
    write_log(task, attempt, {0: 0.2, 4: 0.3, 8: 0.45}, 8)
    refresh(later())
    assert reads == [task.task_id]  # the watch has not seen step 8 yet
    Attempt.objects.filter(pk=attempt.pk).update(last_step=8)
    refresh(later())
    refresh(later())
    assert reads == [task.task_id, task.task_id]
    assert TrialCurve.objects.get(task=task).points == [[0, 0.2], [4, 0.3], [8, 0.45]]


def test_a_step_that_reached_no_rung_is_read_only_every_refresh_every(alice, make_task, reads) -> None:
    sweep = sweep_of(alice)  # rungs 10, 20, 40, ...
    task = trial(make_task, alice, sweep, {0: 0.2, 4: 0.3}, 6)
    refresh()
    attempt = task.attempts.get()

    def logged(step: int) -> None:
        write_log(task, attempt, {0: 0.2, 4: 0.3, 8: 0.4}, step)
        Attempt.objects.filter(pk=attempt.pk).update(last_step=step)

    logged(9)
    refresh()
    assert reads == [task.task_id]  # read at 6, now 9: no rung between, and read a moment ago
    logged(10)
    refresh()
    assert reads == [task.task_id, task.task_id]  # rung 10: at once
    assert RungValue.objects.filter(task=task, rung=10).exists()
    logged(19)
    refresh()
    assert len(reads) == 2
    refresh(later())
    assert len(reads) == 3  # the page's curve, a while later


def test_a_run_without_a_console_is_read_when_its_file_logger_was_written(alice, make_task, reads) -> None:
    """trainer.logger without console: no step line in the driver log, so the watch has seen no
    step; the file logger's time says when there is more to read."""
    sweep = sweep_of(alice)
    ended = trial(make_task, alice, sweep, {10: 0.6}, 10, state=TaskState.SUCCEEDED)
    quiet = trial(make_task, alice, sweep, {0: 0.2, 5: 0.3}, 6)
    Attempt.objects.filter(task=quiet).update(last_step=None)
    refresh()
    refresh()
    assert reads == [ended.task_id, quiet.task_id]  # the file unchanged since: not read again
    assert TrialCurve.objects.get(task=quiet).read_step == 6
    path = metrics_log(quiet, quiet.attempts.get())
    write_log(quiet, quiet.attempts.get(), {0: 0.2, 5: 0.3, 10: 0.4}, 11)
    read_at = TrialCurve.objects.get(task=quiet).read_at
    assert read_at is not None
    written = (read_at + timedelta(seconds=1)).timestamp()
    os.utime(path, (written, written))
    assert refresh() == 0  # read a moment ago: the file's step is unknown until it is read
    assert refresh(read_at + curves.REFRESH_EVERY) == 1
    assert reads == [ended.task_id, quiet.task_id, quiet.task_id]
    assert early_stops(quiet)[0]["cutoff"] == 0.6


def test_a_run_with_no_step_and_no_file_logger_yet_is_not_read(alice, make_task, reads) -> None:
    sweep = sweep_of(alice)
    task = trial(make_task, alice, sweep, {}, 0)
    Attempt.objects.filter(task=task).update(last_step=None)
    metrics_log(task, task.attempts.get()).unlink()
    refresh()
    assert reads == []


def test_a_trial_is_read_once_more_after_it_ends(alice, make_task, reads) -> None:
    sweep = sweep_of(alice)
    task = trial(make_task, alice, sweep, {0: 0.2, 4: 0.3}, 6)
    refresh()
    # It ran on to step 12 and succeeded; the watch saw its log only up to step 6.
    write_log(task, task.attempts.get(), {0: 0.2, 4: 0.3, 8: 0.4, 12: 0.6}, 12)
    Task.objects.filter(pk=task.pk).update(state=TaskState.SUCCEEDED, finished_at=timezone.now())
    refresh()
    refresh()
    assert reads == [task.task_id, task.task_id]
    curve = TrialCurve.objects.get(task=task)
    assert (curve.points[-1], curve.read_step) == ([12, 0.6], 12)
    # Its value at the rung it reached counts for the others, though it is judged no more.
    assert rung_values(sweep) == [(task.task_id, 10, 8, 0.4)]
    assert early_stops(task) == []


def test_the_trial_whose_end_ended_its_sweep_is_read_once_more(alice, make_task, reads) -> None:
    sweep = sweep_of(alice, state=SweepState.SUCCEEDED, finished_at=timezone.now())
    task = trial(make_task, alice, sweep, {0: 0.2, 10: 0.5}, 12, state=TaskState.SUCCEEDED)
    refresh()
    refresh()
    assert reads == [task.task_id]
    assert rung_values(sweep) == [(task.task_id, 10, 10, 0.5)]


def test_the_trials_of_a_sweep_that_ended_long_ago_are_not_looked_at(alice, make_task, reads) -> None:
    long_ago = timezone.now() - AFTER_END - timedelta(seconds=1)
    sweep = sweep_of(alice, state=SweepState.FAILED, finished_at=long_ago)
    trial(make_task, alice, sweep, {0: 0.2}, 3, state=TaskState.FAILED)
    assert due_trials(timezone.now()) == []


def test_an_ended_trial_is_not_read_long_after_its_end(alice, make_task, reads) -> None:
    sweep = sweep_of(alice)
    task = trial(make_task, alice, sweep, {0: 0.2}, 3, state=TaskState.FAILED)
    Task.objects.filter(pk=task.pk).update(finished_at=timezone.now() - AFTER_END - timedelta(seconds=1))
    refresh()
    assert reads == []


def test_a_trial_reaching_a_rung_after_others_ended_is_judged_against_them(alice, make_task) -> None:
    sweep = sweep_of(alice)
    first = trial(make_task, alice, sweep, {0: 0.2, 10: 0.6, 20: 0.8}, 20, state=TaskState.SUCCEEDED)
    second = trial(make_task, alice, sweep, {0: 0.2, 10: 0.5}, 12, state=TaskState.FAILED)
    loser = trial(make_task, alice, sweep, {0: 0.2, 5: 0.3, 10: 0.4}, 11)
    winner = trial(make_task, alice, sweep, {0: 0.2, 10: 0.7}, 10)
    assert refresh() == 1
    assert rung_values(sweep) == [
        (first.task_id, 10, 10, 0.6),
        (second.task_id, 10, 10, 0.5),
        (loser.task_id, 10, 10, 0.4),
        (winner.task_id, 10, 10, 0.7),
        (first.task_id, 20, 20, 0.8),
    ]
    # The loser: n = 3 at rung 10 (the two ended trials' and its own), k = 1, the cutoff 0.6.
    loser.refresh_from_db()
    assert loser.early_stopped
    assert loser.cancel_requested_at is not None
    assert loser.state == TaskState.RUNNING  # until Ray reports the stop (the scheduler's ordinary cancel)
    assert early_stops(loser) == [
        {"rung": 10, "step": 10, "metric": METRIC, "value": 0.4, "cutoff": 0.6, "mode": "max"}
    ]
    event = loser.events.get(kind=EventKind.EARLY_STOPPED)
    assert event.message == (
        f"Stopped early at rung 10: {METRIC} was 0.4 (step 10), below the cutoff 0.6: of the 3 values the "
        "sweep's trials had at this rung, the best 1 go on. Its checkpoints stay."
    )
    kinds = list(loser.events.order_by("pk").values_list("kind", flat=True))
    assert kinds[-2:] == [EventKind.EARLY_STOPPED, EventKind.CANCEL_REQUESTED]
    # The winner: n = 4, k = 2, the cutoff 0.6; 0.7 goes on. The ended ones are judged no more.
    for task in (winner, first, second):
        task.refresh_from_db()
        assert not task.early_stopped and task.cancel_requested_at is None and early_stops(task) == []


def test_a_tie_with_the_cutoff_goes_on(alice, make_task) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6}, 10, state=TaskState.SUCCEEDED)
    tie = trial(make_task, alice, sweep, {10: 0.6}, 10)
    assert refresh() == 0
    tie.refresh_from_db()
    assert not tie.early_stopped and tie.cancel_requested_at is None
    assert len(rung_values(sweep)) == 2


def test_with_mode_min_a_value_above_the_cutoff_stops(alice, make_task) -> None:
    sweep = sweep_of(alice, mode="min", metric=METRIC)
    trial(make_task, alice, sweep, {10: 0.3}, 10, state=TaskState.SUCCEEDED)
    better = trial(make_task, alice, sweep, {10: 0.25}, 10)
    worse = trial(make_task, alice, sweep, {10: 0.5}, 10)  # n = 3, k = 1: the cutoff is 0.25
    assert refresh() == 1
    better.refresh_from_db()
    worse.refresh_from_db()
    assert not better.early_stopped and worse.early_stopped
    assert early_stops(worse) == [
        {"rung": 10, "step": 10, "metric": METRIC, "value": 0.5, "cutoff": 0.25, "mode": "min"}
    ]
    assert "above the cutoff 0.25" in worse.events.get(kind=EventKind.EARLY_STOPPED).message


def test_a_rung_with_no_point_at_or_before_it_is_not_judged(alice, make_task) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.9}, 10, state=TaskState.SUCCEEDED)
    # No validation before training, the first at step 12 (test_freq 12): nothing at rung 10.
    late = trial(make_task, alice, sweep, {12: 0.1}, 15)
    assert refresh() == 0
    late.refresh_from_db()
    assert not late.early_stopped
    assert not RungValue.objects.filter(task=late).exists()
    # At rung 20 its value is the one of step 12; alone there, it goes on.
    write_log(late, late.attempts.get(), {12: 0.1}, 20)
    Attempt.objects.filter(task=late).update(last_step=20)
    assert refresh() == 0
    assert [(rung, step, value) for _, rung, step, value in rung_values(sweep) if rung == 20] == [(20, 12, 0.1)]


def test_eta_is_the_sweeps(alice, make_task) -> None:
    sweep = sweep_of(alice, early_stop={"min_steps": 3, "eta": 3})
    for value in (0.9, 0.8, 0.3, 0.2, 0.1):
        trial(make_task, alice, sweep, {3: value}, 3, state=TaskState.SUCCEEDED)
    # n = 6, k = floor(6 / 3) = 2: the cutoff is 0.8 (with eta 2, k = 3 and 0.7 would go on).
    running = trial(make_task, alice, sweep, {3: 0.7}, 4)
    assert refresh() == 1
    assert early_stops(running) == [
        {"rung": 3, "step": 3, "metric": METRIC, "value": 0.7, "cutoff": 0.8, "mode": "max"}
    ]


def test_each_rung_reached_is_judged_and_the_first_lost_stops_it(alice, make_task) -> None:
    sweep = sweep_of(alice)
    ended = trial(make_task, alice, sweep, {10: 0.3, 20: 0.9, 40: 0.95}, 40, state=TaskState.SUCCEEDED)
    # Read first at step 45: it passed rungs 10, 20 and 40 since.
    jumped = trial(make_task, alice, sweep, {10: 0.5, 20: 0.6, 40: 0.99}, 45)
    assert refresh() == 1
    assert [row[:2] for row in rung_values(sweep) if row[0] == jumped.task_id] == [
        (jumped.task_id, 10),
        (jumped.task_id, 20),
    ]
    assert early_stops(jumped)[0]["rung"] == 20
    assert RungValue.objects.filter(task=ended).count() == 3


def test_a_stopped_trial_records_no_rung_it_logged_before_ray_stopped_it(alice, make_task) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6, 20: 0.7}, 20, state=TaskState.SUCCEEDED)
    loser = trial(make_task, alice, sweep, {10: 0.4}, 10)
    assert refresh() == 1
    # Ray took a while to stop it: it logged up to step 23 and ended CANCELED.
    write_log(loser, loser.attempts.get(), {10: 0.4, 20: 0.5}, 23)
    Task.objects.filter(pk=loser.pk).update(state=TaskState.CANCELED, finished_at=timezone.now())
    assert refresh() == 0
    assert TrialCurve.objects.get(task=loser).points == [[10, 0.4], [20, 0.5]]  # its curve is whole
    assert list(RungValue.objects.filter(task=loser).values_list("rung", flat=True)) == [10]
    assert len(early_stops(loser)) == 1


def test_a_trial_back_in_the_queue_that_lost_at_a_rung_is_canceled_at_once(alice, make_task) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6}, 10, state=TaskState.SUCCEEDED)
    # Its node died after step 11 (the end of its log caught up as its attempt ended): requeued.
    requeued = trial(make_task, alice, sweep, {10: 0.4}, 11, state=TaskState.QUEUED)
    assert refresh() == 1
    requeued.refresh_from_db()
    assert requeued.state == TaskState.CANCELED and requeued.early_stopped  # no use resuming a loser
    assert early_stops(requeued)[0]["cutoff"] == 0.6


def test_a_sweep_without_early_stop_keeps_curves_only(alice, make_task) -> None:
    sweep = sweep_of(alice, early_stop={})
    trial(make_task, alice, sweep, {10: 0.9}, 10, state=TaskState.SUCCEEDED)
    task = trial(make_task, alice, sweep, {10: 0.1}, 12)
    assert refresh() == 0
    assert TrialCurve.objects.get(task=task).points == [[10, 0.1]]
    assert not RungValue.objects.exists()
    task.refresh_from_db()
    assert not task.early_stopped


def test_a_sweep_without_a_metric_reads_nothing(alice, make_task, reads) -> None:
    sweep = sweep_of(alice, metric="", early_stop={})
    trial(make_task, alice, sweep, {10: 0.1}, 12)
    assert due_trials(timezone.now()) == []
    refresh()
    assert reads == [] and not TrialCurve.objects.exists()


def test_a_spent_budget_reads_no_more_and_the_next_tick_reads_the_rest_first(alice, make_task, reads) -> None:
    sweep = sweep_of(alice)
    one = trial(make_task, alice, sweep, {0: 0.2}, 3)
    two = trial(make_task, alice, sweep, {0: 0.2}, 3)
    ticks = iter(range(100))
    refresh_trials(Budget(1.5, clock=lambda: next(ticks)))  # started at 0; 1 < 1.5, then 2: spent
    assert reads == [one.task_id]
    Attempt.objects.filter(task=one).update(last_step=4)  # both due now: the one never read goes first
    ticks = iter(range(100))
    refresh_trials(Budget(1.5, clock=lambda: next(ticks)), later())
    assert reads == [one.task_id, two.task_id]
    refresh(later())
    assert reads == [one.task_id, two.task_id, one.task_id]


def test_a_trial_that_ends_between_the_read_and_the_stop_is_left_alone(alice, make_task, monkeypatch, reads) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6}, 10, state=TaskState.SUCCEEDED)
    task = trial(make_task, alice, sweep, {10: 0.4}, 10)

    def succeeded() -> None:
        Task.objects.filter(pk=task.pk).update(state=TaskState.SUCCEEDED, finished_at=timezone.now())

    after_read(monkeypatch, task, succeeded)
    reads.clear()
    assert refresh() == 0
    task.refresh_from_db()
    assert task.state == TaskState.SUCCEEDED
    assert not task.early_stopped and task.cancel_requested_at is None and early_stops(task) == []
    assert RungValue.objects.filter(task=task, rung=10, value=0.4).exists()  # it reached the rung: it counts
    # It ended after its read: read once more, as every ended trial is.
    assert due_trials(timezone.now()) == [task]


def test_a_person_canceling_at_the_same_time_wins(alice, make_task, monkeypatch) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6}, 10, state=TaskState.SUCCEEDED)
    task = trial(make_task, alice, sweep, {10: 0.4}, 10)

    def canceled() -> None:
        Task.objects.get(pk=task.pk).cancel("api:alice")

    after_read(monkeypatch, task, canceled)
    assert refresh() == 0
    task.refresh_from_db()
    assert not task.early_stopped and early_stops(task) == []
    assert list(task.events.filter(kind=EventKind.CANCEL_REQUESTED).values_list("actor", flat=True)) == ["api:alice"]


def test_two_ticks_stop_a_trial_once(alice, make_task, monkeypatch) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6}, 10, state=TaskState.SUCCEEDED)
    task = trial(make_task, alice, sweep, {10: 0.4}, 10)

    def other_tick() -> None:
        refresh()  # a second scheduler (its lease taken over) reads, records and stops first

    after_read(monkeypatch, task, other_tick)
    assert refresh() == 0  # this one finds the value recorded: judged already
    task.refresh_from_db()
    assert task.early_stopped
    assert len(early_stops(task)) == 1
    assert task.events.filter(kind=EventKind.CANCEL_REQUESTED).count() == 1
    assert RungValue.objects.filter(task=task).count() == 1


def test_a_trial_stopped_once_is_not_claimed_again(alice, make_task) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6}, 10, state=TaskState.SUCCEEDED)
    task = trial(make_task, alice, sweep, {10: 0.4}, 10)
    refresh()
    verdict = judge(10, 10, 0.4, [0.6, 0.4], 2, "max")
    assert not curves.stop(Task.objects.get(pk=task.pk), sweep, verdict)
    assert len(early_stops(task)) == 1


def test_the_tick_stops_a_loser_and_ray_ends_it_canceled(alice, make_task, fake_ray, clock) -> None:
    ray = fake_ray([4])
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6}, 12, state=TaskState.SUCCEEDED)
    task = make_task(alice, sweep=sweep, trial_index=1, params={"lr": 1})
    attempt = running(ray, task, clock)
    # verl's console lines as the driver log has them (no file logger): validation at step 10.
    log(task, attempt, "".join(f"step:{step} - critic/score/mean:0.5\n" for step in range(1, 10)))
    log(task, attempt, f"step:10 - critic/score/mean:0.5 - {METRIC}:np.float64(0.4)\n")
    clock.advance(1)
    tick()
    assert ray.stopped == [attempt.ray_submission_id]  # stopped in the tick that saw the rung
    task.refresh_from_db()
    assert task.early_stopped and task.state == TaskState.RUNNING
    assert TrialCurve.objects.get(task=task).points == [[10, 0.4]]
    ray.set_status(attempt.ray_submission_id, "STOPPED")
    clock.advance(1)
    tick()
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    kinds = list(task.events.order_by("pk").values_list("kind", flat=True))
    assert kinds.index(EventKind.EARLY_STOPPED) < kinds.index(EventKind.CANCEL_REQUESTED)
    assert kinds.index(EventKind.CANCEL_REQUESTED) < kinds.index(EventKind.STOP_REQUESTED)
