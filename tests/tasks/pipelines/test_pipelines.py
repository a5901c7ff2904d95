"""Pipelines: the document's checks, the API's shapes and permissions, and steps handing on their
outputs with a fake Ray (the real one: tests/scheduler/test_pipelines_on_ray.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from accounts.homes import home_dir
from accounts.models import UserLimits
from tasks.choices import EventKind, PipelineState, TaskState
from tasks.jobfiles import checkpoint_dir, job_root
from tasks.models import Task
from tasks.pipelines.document import parse_pipeline
from tasks.pipelines.models import Pipeline
from tasks.scheduler.tick import tick
from tasks.specs.errors import SpecError
from tests.accounts.helpers import assert_error
from tests.conftest import EXPORT, GRPO, PIPELINE, SFT
from webhooks.models import Delivery, Webhook

pytestmark = pytest.mark.django_db
S = TaskState

DOCUMENT = PIPELINE


def document(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"steps": list(steps)}


def problems(doc: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_pipeline(yaml.safe_dump(doc), username="alice")
    return caught.value.fields


# --- The document ---------------------------------------------------------------------------------


def test_a_step_without_after_runs_after_the_one_before_and_macros_stay_as_written(alice, datasets):
    parsed = parse_pipeline(yaml.safe_dump(DOCUMENT), username="alice")
    assert [(s.name, s.after, s.after_any) for s in parsed.steps] == [
        ("sft", (), ()),
        ("sft-export", ("sft",), ()),
        ("grpo", ("sft-export",), ()),
    ]
    assert parsed.steps[1].parsed.resolved.checkpoint == "${steps.sft.checkpoint}"
    assert parsed.steps[2].parsed.resolved.model_id == "${steps.sft-export.hf_model}"
    assert yaml.safe_load(parsed.steps[2].parsed.raw) == {k: v for k, v in GRPO.items() if k != "name"}
    assert (parsed.steps[1].parsed.resolved.nnodes, parsed.steps[1].parsed.resolved.n_gpus_per_node) == (1, 0)


@pytest.mark.parametrize(
    ("steps", "field", "words"),
    [
        ([{**SFT, "after": ["grpo"]}, EXPORT, GRPO], "steps.sft.after", "cycle: sft -> grpo -> sft-export -> sft"),
        ([SFT, {**EXPORT, "after": ["nope"]}], "steps.sft-export.after", "names no step of this pipeline: 'nope'"),
        ([SFT, {**SFT}], "steps.sft.name", "names are unique"),
        ([SFT, {**EXPORT, "name": "Bad_Name"}], "steps[1].name", "a-z, 0-9 and '-'"),
        (
            [{**EXPORT, "checkpoint": "${steps.sft.checkpoint}"}, SFT],
            "steps.sft-export.checkpoint",
            "does not run after",
        ),
        ([SFT, {**EXPORT, "checkpoint": "${steps.rl.checkpoint}"}], "steps.sft-export.checkpoint", "names no step"),
        ([SFT, {**EXPORT, "checkpoint": "${steps.sft.weights}"}], "steps.sft-export.checkpoint", "outputs are task_id"),
        ([SFT, {**GRPO, "model_id": "${steps.sft.hf_model}"}], "steps.grpo.model_id", "only an export step"),
        ([SFT, {**GRPO, "model_id": "${steps.sft.hf_model}", "after_any": []}], "steps.grpo.model_id", "not run after"),
        ([SFT, EXPORT, {**GRPO, "nnodes": 0}], "steps.grpo.nnodes", "between 1 and 1024"),
        ([SFT, {**EXPORT, "n_gpus_per_node": 2}], "steps.sft-export.n_gpus_per_node", "must be 0 for an export"),
        ([{**SFT, "train_file": "/etc/passwd"}], "steps.sft.train_file", "outside the allowed"),
        ([{**SFT, "after": "x"}], "steps.sft.after", "list of step names"),
    ],
)
def test_a_bad_document_names_the_step_and_the_field(alice, datasets, steps, field, words):
    fields = problems(document(*steps))
    assert field in fields, fields
    assert any(words in message for message in fields[field]), fields


def test_every_steps_errors_are_named_at_once(alice, datasets):
    fields = problems(document({**SFT, "nnodes": 0}, {**EXPORT, "backend": "deepspeed"}, {**GRPO, "total_epochs": 0}))
    assert {"steps.sft.nnodes", "steps.sft-export.backend", "steps.grpo.total_epochs"} <= set(fields)


# --- The API --------------------------------------------------------------------------------------


def post(client, body: Any):
    return client.post("/api/v2/pipelines", yaml.safe_dump(body), content_type="application/yaml")


def test_submit_creates_every_task_at_once_and_answers_the_steps(alice, client_for, datasets):
    response = post(client_for(alice), DOCUMENT)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["pipeline_id"].startswith("alice-pipe-") and body["name"] == "qwen-sft-grpo"
    assert body["state"] == PipelineState.RUNNING
    assert [(s["name"], s["state"]) for s in body["steps"]] == [
        ("sft", S.QUEUED),
        ("sft-export", S.WAITING),
        ("grpo", S.WAITING),
    ]
    assert response["Location"] == f"/api/v2/pipelines/{body['pipeline_id']}"
    export = Task.objects.get(task_id=body["steps"][1]["task_id"])
    assert export.pipeline is not None
    assert (export.workload, export.step, export.pipeline.pipeline_id) == ("export", "sft-export", body["pipeline_id"])
    task = client_for(alice).get(f"/api/v2/tasks/{export.task_id}").json()
    assert (task["pipeline_id"], task["step"], task["queued_at"]) == (body["pipeline_id"], "sft-export", None)


def test_a_bad_document_creates_nothing(alice, client_for, datasets):
    bad = {**GRPO, "model_id": "Qwen/Qwen2.5-0.5B-Instruct", "nnodes": 0}
    error = assert_error(post(client_for(alice), document(SFT, bad)), 400, fields=("steps.grpo.nnodes",))
    assert error["code"] == "invalid"
    assert not Task.objects.exists() and not Pipeline.objects.exists()


def test_a_json_body_works_too(alice, client_for, datasets):
    response = client_for(alice).post("/api/v2/pipelines", DOCUMENT, format="json")
    assert response.status_code == 201, response.content


def test_every_step_counts_toward_max_queued_tasks(alice, client_for, datasets):
    UserLimits.objects.create(user=alice, max_queued_tasks=2)
    assert_error(post(client_for(alice), DOCUMENT), 429, "this adds 3; max_queued_tasks is 2")
    assert not Pipeline.objects.exists()


def test_others_see_no_pipeline_of_alices_but_an_admin_does(alice, bob, admin, client_for, datasets):
    pipeline_id = post(client_for(alice), DOCUMENT).json()["pipeline_id"]
    bobs = client_for(bob)
    assert bobs.get("/api/v2/pipelines").json()["results"] == []
    assert_error(bobs.get(f"/api/v2/pipelines/{pipeline_id}"), 404)
    assert_error(bobs.post(f"/api/v2/pipelines/{pipeline_id}/cancel"), 404)
    listed = client_for(admin).get("/api/v2/pipelines").json()["results"]
    assert [p["pipeline_id"] for p in listed] == [pipeline_id]
    assert client_for(admin).get(f"/api/v2/pipelines/{pipeline_id}").status_code == 200


def test_cancel_cancels_every_unfinished_step_and_ends_the_pipeline(alice, client_for, datasets):
    api = client_for(alice)
    pipeline_id = post(api, DOCUMENT).json()["pipeline_id"]
    response = api.post(f"/api/v2/pipelines/{pipeline_id}/cancel")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == PipelineState.CANCELED
    assert {s["state"] for s in body["steps"]} == {S.CANCELED}
    # The person's cancel, not a dependency's failure, for every step.
    assert not Task.objects.filter(events__kind=EventKind.DEPENDENCY_FAILED).exists()
    assert_error(api.post(f"/api/v2/pipelines/{pipeline_id}/cancel"), 409)


# --- Steps handing on their outputs (fake Ray) ----------------------------------------------------


def succeed(ray, task: Task) -> None:
    attempt = task.attempts.get()
    ray.set_status(attempt.ray_submission_id, "SUCCEEDED", driver_exit_code=0)


def checkpoint(task: Task, step: int, actor: bool = False) -> Path:
    """What verl leaves in a task's checkpoints folder: global_step_N (PPO's shards in actor/)."""
    folder = checkpoint_dir(task.user.username, task.task_id)
    shards = folder / f"global_step_{step}" / ("actor" if actor else "")
    shards.mkdir(parents=True, exist_ok=True)
    (folder / "latest_checkpointed_iteration.txt").write_text(str(step))
    return folder / f"global_step_{step}"


def steps_of(pipeline_id: str) -> dict[str, Task]:
    pipeline = Pipeline.objects.get(pipeline_id=pipeline_id)
    return {step.name: step.task for step in pipeline.steps.select_related("task")}


def test_outputs_are_handed_on_when_each_step_is_queued(alice, client_for, datasets, fake_ray):
    ray = fake_ray([4, 4])
    Webhook.create(user=alice, url="https://hooks.example.org/x", events=["PIPELINE_SUCCEEDED"])
    pipeline_id = post(client_for(alice), DOCUMENT).json()["pipeline_id"]
    tick()
    steps = steps_of(pipeline_id)
    assert steps["sft"].state == S.SUBMITTED and steps["sft-export"].state == S.WAITING
    folder = checkpoint(steps["sft"], 2)
    succeed(ray, steps["sft"])
    tick()  # sft ends; the export is queued with its checkpoint written in, and admitted
    export = Task.objects.get(pk=steps["sft-export"].pk)
    assert export.state == S.SUBMITTED
    assert export.spec["checkpoint"] == str(folder)  # SFT's shards are in global_step_N itself
    assert yaml.safe_load(export.spec_raw)["checkpoint"] == "${steps.sft.checkpoint}"
    payload = json.loads((job_root("alice", f"{export.task_id}--a01") / "submission.json").read_text())
    hf_model = home_dir("alice") / "jobs" / export.task_id / "hf_model"
    assert (
        f"-m verl.model_merger merge --backend fsdp --local_dir {folder} --target_dir {hf_model}"
        in (payload["entrypoint"])
    )
    assert payload["entrypoint_num_cpus"] == 4  # ARGUS_EXPORT_CPUS: Ray counts what admission fitted
    assert export.attempts.get().placement in ({"n0": 0}, {"n1": 0})
    hf_model.mkdir(parents=True)
    (hf_model / "config.json").write_text("{}")
    succeed(ray, export)
    tick()
    grpo = Task.objects.get(pk=steps["grpo"].pk)
    assert grpo.state == S.SUBMITTED and grpo.spec["model_id"] == str(hf_model)
    succeed(ray, grpo)
    tick()
    detail = client_for(alice).get(f"/api/v2/pipelines/{pipeline_id}").json()
    assert detail["state"] == PipelineState.SUCCEEDED
    assert [(s["name"], s["state"]) for s in detail["steps"]] == [
        ("sft", S.SUCCEEDED),
        ("sft-export", S.SUCCEEDED),
        ("grpo", S.SUCCEEDED),
    ]
    event = grpo.events.get(kind=EventKind.PIPELINE_SUCCEEDED)
    delivery = Delivery.objects.get(event=event)
    body = json.loads(delivery.body)
    assert (body["event"], body["pipeline_id"], body["step"], body["state"]) == (
        "PIPELINE_SUCCEEDED",
        pipeline_id,
        "grpo",
        "SUCCEEDED",
    )


def test_a_macro_that_cannot_be_resolved_fails_the_step_as_a_user_error_and_retry_reuses_the_rest(
    alice, client_for, datasets, fake_ray
):
    ray = fake_ray([4])
    Webhook.create(user=alice, url="https://hooks.example.org/x", events=["PIPELINE_FAILED", "SUCCEEDED"])
    api = client_for(alice)
    pipeline_id = post(api, DOCUMENT).json()["pipeline_id"]
    tick()
    steps = steps_of(pipeline_id)
    succeed(ray, steps["sft"])  # ...and it saved no checkpoint
    tick()
    export = Task.objects.get(pk=steps["sft-export"].pk)
    assert export.state == S.FAILED and not export.attempts.exists()
    assert export.error_summary.startswith("USER_ERROR: ${steps.sft.checkpoint} cannot be resolved: step 'sft'")
    assert "it left no checkpoint (latest_checkpointed_iteration.txt" in export.error_summary
    tick()
    grpo = Task.objects.get(pk=steps["grpo"].pk)
    assert (grpo.state, grpo.error_summary) == (S.CANCELED, f"its dependency {export.task_id} FAILED")
    detail = api.get(f"/api/v2/pipelines/{pipeline_id}").json()
    assert detail["state"] == PipelineState.FAILED
    assert detail["steps"][1]["reason"] == export.error_summary
    failed = Delivery.objects.get(event_name="PIPELINE_FAILED")
    assert json.loads(failed.body)["pipeline_id"] == pipeline_id

    # The checkpoint is there now: a retry runs the export and GRPO again, not the SFT.
    checkpoint(steps["sft"], 3, actor=True)
    response = api.post(f"/api/v2/pipelines/{pipeline_id}/retry")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == PipelineState.RUNNING
    retried = {s["name"]: s for s in body["steps"]}
    assert retried["sft"]["task_id"] == steps["sft"].task_id and retried["sft"]["state"] == S.SUCCEEDED
    assert retried["sft-export"]["task_id"] != export.task_id
    assert retried["grpo"]["task_id"] != grpo.task_id
    tick()
    new_export = Task.objects.get(task_id=retried["sft-export"]["task_id"])
    assert new_export.state == S.SUBMITTED
    assert new_export.spec["checkpoint"].endswith(f"{steps['sft'].task_id}/checkpoints/global_step_3/actor")
    assert Task.objects.filter(pipeline__pipeline_id=pipeline_id, step="sft").count() == 1
    assert_error(api.post(f"/api/v2/pipelines/{pipeline_id}/retry"), 409, "still running")


def test_a_dag_joins_two_branches(alice, client_for, datasets, fake_ray):
    ray = fake_ray([4, 4])
    left = {**SFT, "name": "left", "after": []}
    right = {**SFT, "name": "right", "after": []}
    join = {
        **EXPORT,
        "name": "join",
        "after": ["left"],
        "after_any": ["right"],
        "checkpoint": "${steps.left.checkpoint}",
    }
    pipeline_id = post(client_for(alice), document(left, right, join)).json()["pipeline_id"]
    tick()
    steps = steps_of(pipeline_id)
    assert (steps["left"].state, steps["right"].state) == (S.SUBMITTED, S.SUBMITTED)
    checkpoint(steps["left"], 1)
    succeed(ray, steps["left"])
    tick()
    assert Task.objects.get(pk=steps["join"].pk).state == S.WAITING  # right is still running
    ray.set_status(steps["right"].attempts.get().ray_submission_id, "FAILED", driver_exit_code=1)
    tick()
    assert Task.objects.get(pk=steps["join"].pk).state == S.SUBMITTED  # after_any: however it ended
