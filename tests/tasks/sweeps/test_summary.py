"""tasks.sweeps.summary: a sweep's trials as its API and page show them, read from the database."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tasks.attempts import Attempt
from tasks.sweeps.summary import summarize
from tests.tasks.sweeps.trials import BATCH, LR, make_sweep

pytestmark = pytest.mark.django_db

GRID = [{LR: lr, BATCH: batch} for lr in (1e-6, 3e-6) for batch in (256, 512)]


def test_it_gives_each_trial_its_values_in_trial_order(alice: User, make_task) -> None:
    sweep, trials = make_sweep(
        alice,
        make_task,
        GRID,
        curves=[[(10, 0.2), (20, 0.5), (30, 0.4)], [(10, 0.1)], None, [(10, 0.3), (20, 0.5)]],
    )
    summary = summarize(sweep)
    assert [row.task_id for row in summary.trials] == [task.task_id for task in trials]
    assert [row.task.params for row in summary.trials] == GRID
    first, second, third, fourth = summary.trials
    assert (first.last_step, first.best_value, first.last_value) == (30, 0.5, 0.4)
    assert first.points == [(10, 0.2), (20, 0.5), (30, 0.4)]
    assert (second.best_value, second.last_value) == (0.1, 0.1)
    assert (fourth.best_value, fourth.last_value) == (0.5, 0.5)
    # No curve yet: nothing to show, no best.
    assert (third.points, third.last_step, third.best_value, third.last_value) == ([], None, None, None)
    # A tie on the best value goes to the earlier trial.
    assert summary.best_trial is first


def test_min_mode_takes_the_lowest_and_a_sweep_without_values_has_no_best(alice: User, make_task) -> None:
    sweep, _ = make_sweep(alice, make_task, GRID[:2], curves=[[(5, 2.0), (10, 1.5)], [(5, 1.0), (10, 3.0)]], mode="min")
    summary = summarize(sweep)
    assert [row.best_value for row in summary.trials] == [1.5, 1.0]
    assert summary.best_trial is summary.trials[1]

    empty, _ = make_sweep(alice, make_task, GRID[:2])
    assert summarize(empty).best_trial is None


def test_last_step_is_the_latest_attempt_that_logged_one(alice: User, make_task) -> None:
    sweep, (trial,) = make_sweep(alice, make_task, GRID[:1], curves=[[(10, 0.2), (40, 0.3)]])
    # A second attempt resumed from step 20 and has logged up to 25: the run is at 25 now.
    Attempt.objects.create(task=trial, attempt_no=2, ray_submission_id=f"{trial.task_id}--a02", last_step=25)
    Attempt.objects.create(task=trial, attempt_no=3, ray_submission_id=f"{trial.task_id}--a03")
    assert summarize(sweep).trials[0].last_step == 25


def test_it_reads_a_sweep_in_a_fixed_number_of_queries(alice: User, make_task) -> None:
    small, _ = make_sweep(alice, make_task, GRID[:1], curves=[[(1, 0.1)]])
    large, _ = make_sweep(alice, make_task, GRID, curves=[[(1, 0.1)]] * 4)
    with CaptureQueriesContext(connection) as one:
        summarize(small)
    with CaptureQueriesContext(connection) as four:
        summarize(large)
    assert len(one) == len(four) == 1


@pytest.mark.parametrize(
    "document",
    [
        f"grid:\n  {LR}: [1.0e-6]\n  {BATCH}: [256]\n",
        f"random:\n  samples: 1\n  space:\n    {LR}: {{loguniform: [1.0e-7, 1.0e-5]}}\n"
        f"    {BATCH}: {{choice: [256]}}\n",
        f'{{"random": {{"samples": 1, "space": {{"{LR}": {{"uniform": [0, 1]}}, "{BATCH}": {{"choice": [256]}}}}}}}}',
    ],
    ids=["grid", "random", "json"],
)
def test_params_keep_the_documents_key_order(alice: User, make_task, document: str) -> None:
    # Stored shortest key first, as PostgreSQL's jsonb gives them back; then a key no section names.
    sweep, _ = make_sweep(alice, make_task, [{BATCH: 256, LR: 1e-6, "z": 1}])
    sweep.document = document
    summary = summarize(sweep)
    assert summary.keys == [LR, BATCH, "z"]
    assert list(summary.trials[0].params) == [LR, BATCH, "z"]
    # A document that no longer reads (or names no keys): the trials' own order, as the database
    # keeps it (SQLite: as written; PostgreSQL's jsonb: shortest key first).
    sweep.document = "name: [unclosed\n"
    assert summarize(sweep).keys == list(sweep.trials.get().params)
