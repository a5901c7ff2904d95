"""Sweeps from the command line: `argus sweep submit|ls|show|cancel`, --json, `argus submit`
recognising a sweep document, and the refusals. The installed command against a live server;
sweeps are submitted by the command, or made by hand with the curves the tick would keep
(tests/tasks/sweeps/trials.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from django.template.loader import render_to_string
from django.utils import timezone

from tasks.choices import TaskState
from tasks.models import Task
from tasks.sweeps.models import Sweep
from tests.cli.conftest import no_traceback
from tests.tasks.sweeps.trials import BATCH, LR, METRIC, make_sweep

S = TaskState
GRID = [{LR: lr, BATCH: batch} for lr in (1e-6, 3e-6) for batch in (256, 512)]
CURVES = [[(10, 0.2), (20, 0.5), (30, 0.4)], [(10, 0.1)], None, [(10, 0.3), (20, 0.6)]]


@pytest.fixture
def sweep_file(tmp_path: Path, datasets: Path) -> Path:
    """The new-task page's sweep template: 3 learning rates x 2 batch sizes, 2 at once."""
    path = tmp_path / "sweep.yaml"
    path.write_text(render_to_string("tasks/specs/sweep.yaml"))
    return path


def test_sweep_submit_prints_the_id_and_the_trials(alice, argus_as, sweep_file):
    result = argus_as(alice).run("sweep", "submit", str(sweep_file))
    assert result.returncode == 0, result.stderr
    sweep = Sweep.objects.get()
    assert result.stdout == f"{sweep.sweep_id}\n"
    assert "6 trials: 2 queued, 4 waiting their turn" in result.stderr
    assert (sweep.user, sweep.name, sweep.document) == (alice, "grpo-lr-batch", sweep_file.read_text())
    states = list(sweep.trials.order_by("trial_index").values_list("state", flat=True))
    assert states == [S.QUEUED] * 2 + [S.WAITING] * 4


def test_submit_recognises_a_sweep_document(alice, argus_as, sweep_file):
    result = argus_as(alice).run("submit", str(sweep_file))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{Sweep.objects.get().sweep_id}\n" and Task.objects.count() == 6


def test_submit_json_answers_the_sweep_as_the_api_shows_it(alice, argus_as, sweep_file):
    # JSON on standard input is a sweep document too.
    document = json.dumps(yaml.safe_load(sweep_file.read_text()))
    result = argus_as(alice).run("sweep", "submit", "-", "--json", input=document)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    sweep = Sweep.objects.get()
    assert (body["sweep_id"], body["state"], body["best_trial"]) == (sweep.sweep_id, "RUNNING", None)
    assert [trial["params"] for trial in body["trials"]] == [
        {LR: lr, BATCH: batch} for lr in (1e-6, 3e-6, 1e-5) for batch in (256, 512)
    ]


def test_a_refused_sweep_names_the_field(alice, argus_as, sweep_file):
    sweep_file.write_text(sweep_file.read_text().replace("[256, 512]", "[]"))
    result = argus_as(alice).run("sweep", "submit", str(sweep_file))
    assert result.returncode == 3
    no_traceback(result)
    assert f"  grid.{BATCH}: " in result.stderr, result.stderr
    assert not Sweep.objects.exists() and not Task.objects.exists()


def test_ls_lists_your_sweeps_with_their_progress_and_best(alice, bob, argus_as, make_task):
    mine, trials = make_sweep(alice, make_task, GRID, curves=CURVES)
    theirs, _ = make_sweep(bob, make_task, GRID[:1])
    Task.objects.filter(pk=trials[1].pk).update(state=S.CANCELED, early_stopped=True, finished_at=timezone.now())
    result = argus_as(alice).run("sweep", "ls")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split() == [
        "SWEEP",
        "NAME",
        "STATE",
        "USER",
        "TRIALS",
        "BEST",
        "CREATED",
        "FINISHED",
    ]
    assert mine.sweep_id in result.stdout and theirs.sweep_id not in result.stdout
    [row] = [line for line in result.stdout.splitlines() if mine.sweep_id in line]
    assert "1/4 ended, 1 stopped early" in row and trials[3].task_id in row

    rows = json.loads(argus_as(alice).run("sweep", "ls", "--json").stdout)
    assert [row["sweep_id"] for row in rows] == [mine.sweep_id]


def test_show_prints_each_trials_params_state_and_values(alice, argus_as, make_task):
    sweep, trials = make_sweep(alice, make_task, GRID, curves=CURVES)
    Task.objects.filter(pk=trials[1].pk).update(state=S.CANCELED, early_stopped=True, finished_at=timezone.now())
    result = argus_as(alice).run("sweep", "show", sweep.sweep_id)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"metric    {METRIC} (max)" in out and "rungs     steps 10 × 2^k" in out
    assert f"best      {trials[3].task_id}" in out and "trials    1/4 ended, 1 stopped early" in out
    table = out[out.index("#") :].splitlines()
    assert table[0].split() == ["#", "TASK", "LR", "TRAIN_BATCH_SIZE", "STATE", "STEP", "BEST", "LAST"]
    assert table[1].split() == ["0", trials[0].task_id, "1e-06", "256", "QUEUED", "30", "0.5", "0.4"]
    assert table[2].split() == [
        "1",
        trials[1].task_id,
        "1e-06",
        "512",
        "CANCELED",
        "(stopped",
        "early)",
        "10",
        "0.1",
        "0.1",
    ]
    assert table[3].split() == ["2", trials[2].task_id, "3e-06", "256", "QUEUED", "-", "-", "-"]
    assert table[4].split() == ["3", trials[3].task_id, "*", "3e-06", "512", "QUEUED", "20", "0.6", "0.6"]
    assert "* the best trial" in result.stderr

    body = json.loads(argus_as(alice).run("sweep", "show", sweep.sweep_id, "--json").stdout)
    assert body["best_trial"] == trials[3].task_id
    assert body["trials"][0] == {
        "task_id": trials[0].task_id,
        "trial_index": 0,
        "params": {LR: 1e-6, BATCH: 256},
        "state": "QUEUED",
        "early_stopped": False,
        "last_step": 30,
        "best_value": 0.5,
        "last_value": 0.4,
    }


def test_cancel_cancels_every_trial_not_ended(alice, argus_as, make_task):
    sweep, trials = make_sweep(alice, make_task, GRID)
    Task.objects.filter(pk=trials[0].pk).update(state=S.SUCCEEDED, finished_at=timezone.now())
    result = argus_as(alice).run("sweep", "cancel", sweep.sweep_id)
    assert result.returncode == 0, result.stderr
    states = dict(Task.objects.filter(sweep=sweep).values_list("trial_index", "state"))
    assert states == {0: S.SUCCEEDED, 1: S.CANCELED, 2: S.CANCELED, 3: S.CANCELED}
    sweep.refresh_from_db()
    assert sweep.canceled_at is not None
    assert result.stderr.startswith(f"{sweep.sweep_id}: ")


def test_cancel_json_and_another_users_sweep(alice, bob, argus_as, make_task):
    sweep, _ = make_sweep(alice, make_task, GRID[:2])
    refused = argus_as(bob).run("sweep", "cancel", sweep.sweep_id)
    assert refused.returncode == 3
    no_traceback(refused)
    assert not Task.objects.filter(state=S.CANCELED).exists()
    result = argus_as(alice).run("sweep", "cancel", sweep.sweep_id, "--json")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["sweep_id"] == sweep.sweep_id
    assert [trial["state"] for trial in body["trials"]] == ["CANCELED", "CANCELED"]


def test_show_names_a_trials_sweep_and_params(alice, argus_as, make_task):
    sweep, trials = make_sweep(alice, make_task, GRID[:2])
    Task.objects.filter(pk=trials[1].pk).update(state=S.CANCELED, early_stopped=True, finished_at=timezone.now())
    result = argus_as(alice).run("show", trials[1].task_id)
    assert result.returncode == 0, result.stderr
    assert f"sweep       {sweep.sweep_id} (trial 1)" in result.stdout
    assert f"params      {LR}=1e-06, {BATCH}=512" in result.stdout
    assert "stopped     early, by its sweep" in result.stdout
    plain = argus_as(alice).run("show", make_task(alice).task_id)
    assert "sweep" not in plain.stdout and "params" not in plain.stdout


def test_cancel_of_a_sweep_that_ends_succeeded_says_so(alice, argus_as, make_task):
    # A trial had succeeded, the others wait: canceled at once, the sweep ends SUCCEEDED (nothing on Ray).
    sweep, trials = make_sweep(alice, make_task, GRID[:2])
    Task.objects.filter(pk=trials[0].pk).update(state=S.SUCCEEDED, finished_at=timezone.now())
    result = argus_as(alice).run("sweep", "cancel", sweep.sweep_id)
    assert result.returncode == 0, result.stderr
    sweep.refresh_from_db()
    assert sweep.state == "SUCCEEDED"
    assert result.stderr == f"{sweep.sweep_id}: SUCCEEDED (a trial had succeeded); every trial not ended is canceled\n"
