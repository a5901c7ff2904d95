"""Pipelines and dependencies on a real Ray cluster, through the stand-in trainer and its model
merger (tests/standin): steps in order handing on their outputs, a failure canceling what
follows, a cancel mid-pipeline, a retry reusing what succeeded, two branches joining,
after / after_any on plain tasks, and an SFT -> export -> eval pipeline ending with the eval's
metrics."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User

from accounts.homes import home_dir
from devkit.standin import standin_spec
from tasks.choices import EventKind, FailureKind, PipelineState, TaskState
from tasks.jobfiles import checkpoint_dir, metrics_log
from tasks.models import Event, Task
from tasks.pipelines.models import Pipeline
from tests.scheduler.conftest import tick_until
from tests.scheduler.test_durable import steps_in

pytestmark = pytest.mark.ray
S = TaskState


def trainer(name: str, module: str = "main_ppo", steps: int = 2, extra: str = "", **keys: Any) -> dict[str, Any]:
    """A step running the stand-in trainer on one 4-GPU node, ``steps`` steps of 0.1 s."""
    workload = "sft" if module == "sft_trainer_ray" else "ppo"
    command = (
        f"python3 -m verl.trainer.{module} trainer.nnodes=1 trainer.n_gpus_per_node=4 +standin.steps={steps} "
        f"+standin.step_s=0.1 trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR {extra}"
    )
    spec = {"name": name, "kind": "advanced", "workload": workload, "nnodes": 1, "n_gpus_per_node": 4}
    return {**spec, "command": command.strip(), **keys}


@pytest.fixture
def pipeline_of(client_for) -> Callable[[User, list[dict[str, Any]]], Pipeline]:
    def submit(user: User, steps: list[dict[str, Any]]) -> Pipeline:
        body = yaml.safe_dump({"steps": steps}, sort_keys=False)
        response = client_for(user).post("/api/v2/pipelines", body, content_type="application/yaml")
        assert response.status_code == 201, response.content
        return Pipeline.objects.get(pipeline_id=response.json()["pipeline_id"])

    return submit


def steps_of(pipeline: Pipeline) -> dict[str, Task]:
    return {step.name: step.task for step in pipeline.steps.select_related("task")}


def ended(pipeline: Pipeline) -> bool:
    pipeline.refresh_from_db()
    return pipeline.is_finished


def at(moment: datetime | None) -> datetime:
    assert moment is not None
    return moment


def started_at(task: Task) -> datetime:
    attempt = task.attempts.order_by("attempt_no").first()
    assert attempt is not None, task
    return attempt.created_at


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipeline.yaml"


def test_the_example_runs_sft_export_ppo_in_order_each_reading_the_last_ones_output(on_ray, client_for, alice):
    """examples/pipeline.yaml, `make run`'s pipeline demo, as shipped but for the stand-in's step
    time (0.5 s there, for people to watch)."""
    document = EXAMPLE.read_text().replace("+standin.step_s=0.5", "+standin.step_s=0.05")
    assert document.count("+standin.step_s=0.05") == 2
    response = client_for(alice).post("/api/v2/pipelines", document, content_type="application/yaml")
    assert response.status_code == 201, response.content
    pipeline = Pipeline.objects.get(pipeline_id=response.json()["pipeline_id"])
    tick_until(lambda: ended(pipeline), timeout=240)
    steps = steps_of(pipeline)
    assert pipeline.state == PipelineState.SUCCEEDED, {name: task.error_summary for name, task in steps.items()}
    sft, export, ppo = (Task.objects.get(pk=steps[name].pk) for name in ("sft", "sft-export", "ppo"))
    assert [task.state for task in (sft, export, ppo)] == [S.SUCCEEDED] * 3
    # In order: each queued (and started) only after the one before it ended.
    assert at(sft.finished_at) <= at(export.queued_at) <= started_at(export)
    assert at(export.finished_at) <= at(ppo.queued_at) <= started_at(ppo)
    # SFT's last checkpoint (verl's SFT trainer saves at the last step) went to the merger as it is...
    global_step = checkpoint_dir("alice", sft.task_id) / "global_step_8"
    assert export.spec["checkpoint"] == str(global_step)
    hf_model = home_dir("alice") / "jobs" / export.task_id / "hf_model"
    assert (hf_model / "config.json").is_file()
    assert str(global_step) in (hf_model / "model.safetensors").read_text()  # merged from it
    # ...and PPO's model path is the export's folder, in the command Ray ran, to its last step.
    assert f"actor_rollout_ref.model.path={hf_model} " in ppo.spec["command"] + " "
    assert "${steps." not in ppo.spec["command"] and "${steps." in ppo.spec_raw
    metrics = client_for(alice).get(f"/api/v2/tasks/{ppo.task_id}/metrics").json()
    assert metrics["last_step"] == 12
    assert [(e.kind, e.task_id) for e in pipeline_events(pipeline)] == [(EventKind.PIPELINE_SUCCEEDED, ppo.pk)]


def pipeline_events(pipeline: Pipeline) -> list[Event]:
    kinds = (EventKind.PIPELINE_SUCCEEDED, EventKind.PIPELINE_FAILED)
    return list(Event.objects.filter(task__pipeline=pipeline, kind__in=kinds))


def test_a_failed_first_step_cancels_the_rest_unrun(on_ray, alice, pipeline_of):
    pipeline = pipeline_of(
        alice,
        [
            trainer("first", extra="+standin.fail=runtime"),
            trainer("second"),
            {"name": "third", "workload": "export", "checkpoint": "${steps.second.checkpoint}"},
        ],
    )
    tick_until(lambda: ended(pipeline), timeout=90)
    assert pipeline.state == PipelineState.FAILED
    steps = {name: Task.objects.get(pk=task.pk) for name, task in steps_of(pipeline).items()}
    assert steps["first"].state == S.FAILED
    for name, before in (("second", "first"), ("third", "second")):
        task = steps[name]
        reason = f"its dependency {steps[before].task_id} {steps[before].state}"
        assert (task.state, task.error_summary) == (S.CANCELED, reason)
        assert not task.attempts.exists()
        assert task.events.filter(kind=EventKind.DEPENDENCY_FAILED).count() == 1


def test_cancel_mid_pipeline(on_ray, alice, pipeline_of, client_for):
    pipeline = pipeline_of(alice, [trainer("long", steps=300), trainer("next")])
    steps = steps_of(pipeline)
    tick_until(lambda: Task.objects.get(pk=steps["long"].pk).state == S.RUNNING)
    response = client_for(alice).post(f"/api/v2/pipelines/{pipeline.pipeline_id}/cancel")
    assert response.status_code == 202, response.content  # the running step stops once Ray says so
    assert [s["state"] for s in response.json()["steps"]] == [S.RUNNING, S.CANCELED]
    tick_until(lambda: ended(pipeline), timeout=60)
    assert pipeline.state == PipelineState.CANCELED
    assert Task.objects.get(pk=steps["long"].pk).state == S.CANCELED
    assert not steps["next"].attempts.exists()


def test_a_retry_after_a_failure_reuses_the_step_that_succeeded(on_ray, alice, pipeline_of, client_for):
    # train saves no checkpoint (save_freq -1, verl's default): the export's macro cannot be resolved.
    pipeline = pipeline_of(
        alice,
        [
            trainer("train", extra="trainer.save_freq=-1"),
            {"name": "export", "workload": "export", "checkpoint": "${steps.train.checkpoint}"},
        ],
    )
    tick_until(lambda: ended(pipeline), timeout=90)
    assert pipeline.state == PipelineState.FAILED
    train, export = (Task.objects.get(pk=task.pk) for task in steps_of(pipeline).values())
    assert train.state == S.SUCCEEDED
    assert export.state == S.FAILED and export.error_summary.startswith("USER_ERROR: ${steps.train.checkpoint}")
    assert not export.attempts.exists()
    # The user saves a checkpoint where verl would have (global_step_N/actor, the tracker last).
    save_like_verl(checkpoint_dir("alice", train.task_id), 2)
    response = client_for(alice).post(f"/api/v2/pipelines/{pipeline.pipeline_id}/retry")
    assert response.status_code == 200, response.content
    tick_until(lambda: ended(pipeline), timeout=90)
    assert pipeline.state == PipelineState.SUCCEEDED
    now = {name: Task.objects.get(pk=task.pk) for name, task in steps_of(pipeline).items()}
    assert now["train"].pk == train.pk and train.attempts.count() == 1  # reused, not run again
    assert now["export"].pk != export.pk and now["export"].state == S.SUCCEEDED
    assert now["export"].spec["checkpoint"].endswith("global_step_2/actor")  # PPO's shards: actor/
    assert (home_dir("alice") / "jobs" / now["export"].task_id / "hf_model" / "model.safetensors").is_file()


def test_a_retried_step_resumes_from_the_checkpoint_its_failed_task_left(
    on_ray, alice, pipeline_of, client_for, settings
):
    """train saves at step 3 and its TaskRunner dies right after (a crash: os._exit); the
    pipeline fails. Its retry's new task starts from that checkpoint, linked into its own folder:
    verl (the stand-in, as verl 0.9.1's resume_mode=auto) says so and goes on at step 4."""
    settings.ARGUS_NODE_DEATH_WAIT_S = 0  # no node dies here: the crash is the verdict at once
    pipeline = pipeline_of(
        alice,
        [
            trainer("train", steps=6, extra="trainer.save_freq=3 +standin.exit_after=3"),
            {"name": "export", "workload": "export", "checkpoint": "${steps.train.checkpoint}"},
        ],
    )
    tick_until(lambda: ended(pipeline), timeout=90)
    assert pipeline.state == PipelineState.FAILED
    failed = Task.objects.get(pk=steps_of(pipeline)["train"].pk)
    assert failed.state == S.FAILED and failed.attempts.get().failure_kind == FailureKind.RUNTIME_ERROR
    assert steps_in(Path(failed.attempts.get().log_path)) == [1, 2, 3]
    response = client_for(alice).post(f"/api/v2/pipelines/{pipeline.pipeline_id}/retry")
    assert response.status_code == 200, response.content
    tick_until(lambda: ended(pipeline), timeout=120)
    train = Task.objects.get(pk=steps_of(pipeline)["train"].pk)
    assert pipeline.state == PipelineState.SUCCEEDED, train.error_summary
    assert train.pk != failed.pk
    attempt = train.attempts.get()
    assert attempt.resumed_from_step == 3
    log = Path(attempt.log_path)
    assert f"Resuming from {checkpoint_dir('alice', train.task_id) / 'global_step_3'}" in log.read_text()
    assert steps_in(log) == [4, 5, 6]
    retried = train.events.get(kind=EventKind.PIPELINE_RETRY)
    assert (retried.data["replaces"], retried.data["resumes_from_step"]) == (failed.task_id, 3)
    export = Task.objects.get(pk=steps_of(pipeline)["export"].pk)
    assert export.spec["checkpoint"] == str(checkpoint_dir("alice", train.task_id) / "global_step_6" / "actor")


def save_like_verl(folder: Path, step: int) -> None:
    actor = folder / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "config.json").write_text('{"model_type": "qwen2"}\n')
    (actor / "fsdp_config.json").write_text('{"world_size": 1}\n')
    (actor / "model_world_size_1_rank_0.pt").write_text("shard\n")
    (folder / "latest_checkpointed_iteration.txt").write_text(str(step))


def test_two_branches_run_side_by_side_and_join(on_ray, alice, pipeline_of):
    pipeline = pipeline_of(
        alice,
        [
            trainer("left", steps=6, after=[]),
            trainer("right", steps=6, extra="trainer.save_freq=3", after=[]),
            {
                "name": "join",
                "workload": "export",
                "after": ["left", "right"],
                "checkpoint": "${steps.right.checkpoint}",
            },
        ],
    )
    steps = steps_of(pipeline)
    tick_until(lambda: ended(pipeline), timeout=120)
    assert pipeline.state == PipelineState.SUCCEEDED
    left, right, join = (Task.objects.get(pk=steps[name].pk) for name in ("left", "right", "join"))
    # Both branches on Ray at once (one node each), the join only after both ended.
    assert started_at(left) < at(right.finished_at) and started_at(right) < at(left.finished_at)
    assert max(at(left.finished_at), at(right.finished_at)) <= at(join.queued_at)


def test_after_and_after_any_on_plain_tasks(on_ray, alice, submit, settings):
    settings.ARGUS_SCHEDULING_POLICY = "strict_fifo"
    good = submit(alice, standin_spec(steps=2, step_s=0.1))
    bad = submit(alice, standin_spec(steps=2, step_s=0.1, extra="+standin.fail=runtime"))
    after_good = submit(alice, standin_spec(steps=2, step_s=0.1) + f"after: [{good.task_id}]\n")
    after_bad = submit(alice, standin_spec(steps=2, step_s=0.1) + f"after: [{bad.task_id}]\n")
    anyway = submit(alice, standin_spec(steps=2, step_s=0.1) + f"after_any: [{bad.task_id}]\n")
    assert {t.state for t in (after_good, after_bad, anyway)} == {S.WAITING}
    # Strict FIFO, and the WAITING ones were made before this one: it starts all the same, on
    # the GPUs they do not hold (a WAITING task is not in the queue).
    late = submit(alice, standin_spec(nnodes=1, gpus=4, steps=2, step_s=0.1))
    tasks = (good, bad, after_good, after_bad, anyway, late)
    tick_until(lambda: all(ended_task(t) for t in tasks), timeout=150)
    assert [t.state for t in tasks] == [S.SUCCEEDED, S.FAILED, S.SUCCEEDED, S.CANCELED, S.SUCCEEDED, S.SUCCEEDED]
    assert after_bad.error_summary == f"its dependency {bad.task_id} FAILED" and not after_bad.attempts.exists()
    assert at(good.finished_at) <= at(after_good.queued_at) and at(bad.finished_at) <= at(anyway.queued_at)
    assert started_at(late) < min(started_at(after_good), started_at(anyway))


def ended_task(task: Task) -> bool:
    task.refresh_from_db()
    return task.is_terminal


def test_sft_export_eval_ends_with_the_evals_metrics(on_ray, alice, pipeline_of, client_for, datasets):
    """The Definition of done's pipeline: the eval, a basic spec, validates the model the export
    merged (verl's val-only run: one validation, logged at step 0) and the pipeline ends with its
    metrics as the eval task's result."""
    pipeline = pipeline_of(
        alice,
        [
            trainer("sft", module="sft_trainer_ray", steps=2),
            {"name": "export", "workload": "export", "checkpoint": "${steps.sft.checkpoint}"},
            {
                "name": "eval",
                "workload": "eval",
                "model_id": "${steps.export.hf_model}",
                "nnodes": 1,
                "n_gpus_per_node": 4,
                "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
            },
        ],
    )
    tick_until(lambda: ended(pipeline), timeout=90)
    steps = {name: Task.objects.get(pk=task.pk) for name, task in steps_of(pipeline).items()}
    assert pipeline.state == PipelineState.SUCCEEDED, {name: task.error_summary for name, task in steps.items()}
    evaluation = steps["eval"]
    attempt = evaluation.attempts.get()  # it ran once: SUCCEEDED, neither INCOMPLETE nor retried
    assert attempt.failure_kind == ""
    assert evaluation.spec["model_id"] == str(home_dir("alice") / "jobs" / steps["export"].task_id / "hf_model")
    records = [json.loads(line) for line in metrics_log(evaluation, attempt).read_text().splitlines()]
    assert [record["step"] for record in records] == [0]  # validated once, trained nothing
    logged = {key: value for key, value in records[0]["data"].items() if key.startswith("val-")}
    assert "val-core/openai/gsm8k/reward/mean@1" in logged
    assert evaluation.result_metrics == logged
    body = client_for(alice).get(f"/api/v2/pipelines/{pipeline.pipeline_id}").json()
    assert [step["result_metrics"] for step in body["steps"]] == [{}, {}, logged]
