"""The sweep API (/api/v2/sweeps): submit (YAML or JSON), list, detail, cancel; who sees what;
a trial's sweep in the task API; the queries each answer costs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.utils import timezone

from accounts.models import UserLimits
from tasks.choices import SweepState, TaskState
from tasks.models import Task
from tasks.sweeps.models import Sweep
from tests.accounts.helpers import assert_error
from tests.conftest import TRAIN
from tests.tasks.sweeps.trials import BATCH, LR, METRIC, make_sweep

pytestmark = pytest.mark.django_db
S = TaskState

# test_freq: early stopping on a validation metric needs one (tasks.sweeps.document refuses -1).
BASE = {"workload": "grpo", "model_id": "Qwen/Qwen2.5-0.5B-Instruct", **TRAIN, "test_freq": 5}
DOCUMENT: dict[str, Any] = {
    "name": "lr-sweep",
    "base": BASE,
    "grid": {LR: [1.0e-6, 3.0e-6], BATCH: [256, 512]},
    "max_concurrent": 2,
    "early_stop": {"metric": METRIC, "mode": "max", "min_steps": 10, "eta": 2},
}
GRID = [{LR: lr, BATCH: batch} for lr in (1.0e-6, 3.0e-6) for batch in (256, 512)]
TRIAL_FIELDS = ["task_id", "trial_index", "params", "state", "early_stopped", "last_step", "best_value", "last_value"]


def post(client, document: dict[str, Any]):
    return client.post("/api/v2/sweeps", yaml.safe_dump(document, sort_keys=False), content_type="application/yaml")


# --- Submit ---------------------------------------------------------------------------------------


def test_submit_answers_201_with_the_sweep_as_get_shows_it(alice, client_for, datasets: Path):
    api = client_for(alice)
    response = post(api, DOCUMENT)
    assert response.status_code == 201, response.content
    body = response.json()
    assert response["Location"] == f"/api/v2/sweeps/{body['sweep_id']}"
    assert body == api.get(f"/api/v2/sweeps/{body['sweep_id']}").json()
    assert body["sweep_id"].startswith("alice-sweep-")
    assert (body["name"], body["state"], body["max_concurrent"], body["metric"], body["mode"]) == (
        "lr-sweep",
        SweepState.RUNNING,
        2,
        METRIC,
        "max",
    )
    assert body["early_stop"] == {"min_steps": 10, "eta": 2} and body["finished_at"] is None
    # Grid order: the first key's values outermost; the cap's first two queued, the others waiting.
    assert [(t["trial_index"], t["params"], t["state"]) for t in body["trials"]] == [
        (0, GRID[0], S.QUEUED),
        (1, GRID[1], S.QUEUED),
        (2, GRID[2], S.WAITING),
        (3, GRID[3], S.WAITING),
    ]
    assert list(body["trials"][0]) == TRIAL_FIELDS
    assert body["trials"][2] | {"task_id": ""} == {
        "task_id": "",
        "trial_index": 2,
        "params": GRID[2],
        "state": S.WAITING,
        "early_stopped": False,
        "last_step": None,
        "best_value": None,
        "last_value": None,
    }
    assert body["best_trial"] is None  # no trial has a value yet
    waiting = api.get(f"/api/v2/tasks/{body['trials'][3]['task_id']}").json()
    assert waiting["pending_reason"] == "sweep lr-sweep: 2 of 2 trials running"


def test_a_json_body_works_too(alice, client_for, datasets: Path):
    api = client_for(alice)
    response = api.post("/api/v2/sweeps", DOCUMENT, format="json")
    assert response.status_code == 201, response.content
    wrapped = api.post("/api/v2/sweeps", {"spec": yaml.safe_dump(DOCUMENT)}, format="json")
    assert wrapped.status_code == 201, wrapped.content
    assert len(wrapped.json()["trials"]) == 4


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"grid": {LR: []}}, f"grid.{LR}", "one or more values"),
        ({"grid": {"not a key!": [1]}}, "grid.not a key!", "neither a spec key nor a Hydra key"),
        ({"base": {**BASE, "after": ["alice-ppo-20261127-000000-0000"]}}, "base.after", "max_concurrent"),
        ({"grid": {"nnodes": [1, 0]}}, "grid.nnodes", "nnodes=0"),
        ({"max_concurrent": 0}, "max_concurrent", "integer from 1"),
        ({"early_stop": {"metric": METRIC, "mode": "best"}}, "early_stop.mode", "max or min"),
        ({"grid": None}, "grid", "is required"),
    ],
)
def test_a_bad_document_is_a_400_naming_the_field_and_creates_nothing(
    alice, client_for, datasets: Path, changes, field, words
):
    error = assert_error(post(client_for(alice), {**DOCUMENT, **changes}), 400, fields=(field,))
    assert any(words in message for message in error["fields"][field]), error
    assert (Sweep.objects.count(), Task.objects.count()) == (0, 0)


def test_too_many_trials_is_a_400_naming_the_setting(alice, client_for, datasets: Path, settings):
    settings.ARGUS_SWEEP_MAX_TRIALS = 3
    error = assert_error(post(client_for(alice), DOCUMENT), 400, fields=("grid",))
    assert "ARGUS_SWEEP_MAX_TRIALS" in error["fields"]["grid"][0]


def test_a_body_that_is_no_document_is_a_400(alice, client_for, datasets: Path):
    assert_error(client_for(alice).post("/api/v2/sweeps", "- a\n- list\n", content_type="application/yaml"), 400)
    assert_error(client_for(alice).post("/api/v2/sweeps", b"\xff\xfe", content_type="application/yaml"), 400)


def test_every_trial_counts_toward_max_queued_tasks(alice, client_for, datasets: Path):
    UserLimits.objects.create(user=alice, max_queued_tasks=3)
    assert_error(post(client_for(alice), DOCUMENT), 429, "max_queued_tasks is 3")
    assert not Sweep.objects.exists()


def test_priority_high_not_granted_is_a_403(alice, client_for, datasets: Path):
    assert_error(post(client_for(alice), {**DOCUMENT, "base": {**BASE, "priority": "high"}}), 403)
    assert not Sweep.objects.exists()


# --- Read -----------------------------------------------------------------------------------------


def test_the_detail_gives_each_trial_its_values_in_trial_order_and_the_best_trial(alice, client_for, make_task):
    sweep, trials = make_sweep(
        alice,
        make_task,
        GRID,
        curves=[[(10, 0.2), (20, 0.5), (30, 0.4)], [(10, 0.1)], None, [(10, 0.3), (20, 0.5)]],
    )
    Task.objects.filter(pk=trials[1].pk).update(state=S.CANCELED, early_stopped=True)
    body = client_for(alice).get(f"/api/v2/sweeps/{sweep.sweep_id}").json()
    rows = [
        (t["task_id"], t["last_step"], t["best_value"], t["last_value"], t["early_stopped"]) for t in body["trials"]
    ]
    assert rows == [
        (trials[0].task_id, 30, 0.5, 0.4, False),
        (trials[1].task_id, 10, 0.1, 0.1, True),
        (trials[2].task_id, None, None, None, False),
        (trials[3].task_id, 20, 0.5, 0.5, False),
    ]
    assert body["best_trial"] == trials[0].task_id  # 0.5 twice: the first in trial order


def test_the_best_trial_follows_the_mode(alice, client_for, make_task):
    sweep, trials = make_sweep(alice, make_task, GRID[:3], curves=[[(5, 2.0)], [(5, 0.5), (9, 3.0)], [(5, 1.0)]])
    Sweep.objects.filter(pk=sweep.pk).update(mode="min")
    body = client_for(alice).get(f"/api/v2/sweeps/{sweep.sweep_id}").json()
    assert body["mode"] == "min" and body["best_trial"] == trials[1].task_id
    assert [t["best_value"] for t in body["trials"]] == [2.0, 0.5, 1.0]


def test_the_list_is_the_users_own_and_an_admins_all_paginated(alice, bob, admin, client_for, make_task):
    older, _ = make_sweep(alice, make_task, GRID[:1], name="older")
    Sweep.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(hours=1))
    newer, _ = make_sweep(alice, make_task, GRID[:2], name="newer")
    bobs, _ = make_sweep(bob, make_task, GRID[:1], name="bobs")
    body = client_for(alice).get("/api/v2/sweeps").json()
    assert body["count"] == 2
    assert [s["sweep_id"] for s in body["results"]] == [newer.sweep_id, older.sweep_id]  # newest first
    assert [len(s["trials"]) for s in body["results"]] == [2, 1]
    assert client_for(bob).get("/api/v2/sweeps").json()["count"] == 1
    everyone = client_for(admin).get("/api/v2/sweeps?page_size=2").json()
    assert everyone["count"] == 3 and len(everyone["results"]) == 2 and everyone["next"]
    assert {s["user"] for s in client_for(admin).get("/api/v2/sweeps").json()["results"]} == {"alice", "bob"}
    assert bobs.sweep_id in {s["sweep_id"] for s in client_for(admin).get("/api/v2/sweeps").json()["results"]}


def test_another_users_sweep_is_a_404_and_an_admin_sees_it(alice, bob, admin, client_for, make_task):
    sweep, _ = make_sweep(alice, make_task, GRID[:2])
    assert_error(client_for(bob).get(f"/api/v2/sweeps/{sweep.sweep_id}"), 404)
    assert_error(client_for(bob).post(f"/api/v2/sweeps/{sweep.sweep_id}/cancel"), 404)
    assert Sweep.objects.get(pk=sweep.pk).canceled_at is None
    assert client_for(admin).get(f"/api/v2/sweeps/{sweep.sweep_id}").status_code == 200
    assert_error(client_for(alice).get("/api/v2/sweeps/nope"), 404)


def test_the_detail_and_the_list_cost_the_same_queries_for_any_number_of_trials(
    alice, client_for, make_task, django_assert_num_queries
):
    small, _ = make_sweep(alice, make_task, GRID[:1], curves=[[(1, 0.1)]])
    api = client_for(alice)
    api.get("/api/v2/sweeps")  # the token's first use writes its last_used (once a minute)
    # The token; the sweep; its trials with their curves and last steps.
    with django_assert_num_queries(3):
        api.get(f"/api/v2/sweeps/{small.sweep_id}")
    large, _ = make_sweep(alice, make_task, GRID * 3, curves=[[(1, 0.1)]] * 12)
    with django_assert_num_queries(3):
        assert len(api.get(f"/api/v2/sweeps/{large.sweep_id}").json()["trials"]) == 12
    # The token; the count; the page of sweeps; every one's trials at once.
    with django_assert_num_queries(4):
        assert [len(s["trials"]) for s in api.get("/api/v2/sweeps").json()["results"]] == [12, 1]


# --- Cancel ---------------------------------------------------------------------------------------


def test_cancel_cancels_every_trial_not_ended_and_ends_the_sweep(alice, client_for, datasets: Path):
    api = client_for(alice)
    sweep_id = post(api, DOCUMENT).json()["sweep_id"]
    response = api.post(f"/api/v2/sweeps/{sweep_id}/cancel")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == SweepState.CANCELED and body["finished_at"] is not None
    assert {t["state"] for t in body["trials"]} == {S.CANCELED}
    assert_error(api.post(f"/api/v2/sweeps/{sweep_id}/cancel"), 409, "already CANCELED")


def test_cancel_of_a_trial_on_ray_answers_202_until_ray_stops_it(alice, client_for, datasets: Path):
    api = client_for(alice)
    sweep_id = post(api, DOCUMENT).json()["sweep_id"]
    first = Sweep.objects.get(sweep_id=sweep_id).trials.get(trial_index=0)
    Task.objects.filter(pk=first.pk).update(state=S.RUNNING)
    response = api.post(f"/api/v2/sweeps/{sweep_id}/cancel")
    assert response.status_code == 202, response.content
    assert [t["state"] for t in response.json()["trials"]] == [S.RUNNING, S.CANCELED, S.CANCELED, S.CANCELED]
    assert response.json()["state"] == SweepState.RUNNING


# --- The task API ---------------------------------------------------------------------------------


def test_a_trials_task_names_its_sweep_and_params(alice: User, client_for, make_task, django_assert_num_queries):
    sweep, trials = make_sweep(alice, make_task, GRID[:2])
    Task.objects.filter(pk=trials[1].pk).update(early_stopped=True)
    plain = make_task(alice)
    api = client_for(alice)
    detail = api.get(f"/api/v2/tasks/{trials[1].task_id}").json()
    assert (detail["sweep_id"], detail["trial_index"], detail["params"], detail["early_stopped"]) == (
        sweep.sweep_id,
        1,
        GRID[1],
        True,
    )
    alone = api.get(f"/api/v2/tasks/{plain.task_id}").json()
    assert (alone["sweep_id"], alone["trial_index"], alone["params"], alone["early_stopped"]) == (None, None, {}, False)
    # The list reads each task's sweep in its own query, not one more per task.
    with django_assert_num_queries(3):  # the token, the count, the page
        listed = api.get("/api/v2/tasks").json()["results"]
    assert {t["task_id"]: t["sweep_id"] for t in listed} == {
        plain.task_id: None,
        trials[0].task_id: sweep.sweep_id,
        trials[1].task_id: sweep.sweep_id,
    }
