"""Pipelines from the command line: submit a document, `argus pipeline ls|show|cancel|retry`,
--json, and --follow's exit code. The installed command against a live server; the test plays
the scheduler (it moves the steps' tasks with the model's own transitions), as test_follow does.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.utils import timezone

from devkit.wait import wait_for
from tasks.attempts import Attempt
from tasks.choices import PipelineState, Role, TaskState
from tasks.models import Task
from tasks.pipelines.actions import submit_pipeline
from tasks.pipelines.models import Pipeline
from tasks.queue import reasons as queue_reasons
from tests.cli.conftest import no_traceback, read_until
from tests.conftest import EXPORT, GRPO, PIPELINE_YAML, SFT

S = TaskState

DOCUMENT = PIPELINE_YAML


@pytest.fixture
def pipeline_file(tmp_path: Path, datasets: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(DOCUMENT)
    return path


def steps_of(pipeline: Pipeline) -> dict[str, Task]:
    return {step.name: step.task for step in pipeline.steps.select_related("task")}


def run_step(process: subprocess.Popen[str], task: Task, log: Path, lines: str, end: str, **changes: Any) -> str:
    """The scheduler's part for one step: queue it (if it waited), run it with a log, end it once
    the following command has shown the log; what the command wrote until then."""
    task.refresh_from_db()
    if task.state == S.WAITING:
        task.transition(S.QUEUED, role=Role.SCHEDULER, actor="scheduler", queued_at=timezone.now())
    log.write_text(lines)
    attempt = Attempt.objects.create(
        task=task, attempt_no=1, ray_submission_id=f"{task.task_id}--a01", log_path=str(log), start_time=timezone.now()
    )
    for state in (S.SUBMITTING, S.SUBMITTED, S.RUNNING):
        task.transition(state, role=Role.SCHEDULER, actor="scheduler")
    seen = read_until(process.stdout, lines)
    Attempt.objects.filter(pk=attempt.pk).update(end_time=timezone.now())
    task.transition(end, role=Role.SCHEDULER, actor="scheduler", **changes)
    return seen


def end_steps(pipeline: Pipeline, **states: str) -> None:
    for name, task in steps_of(pipeline).items():
        Task.objects.filter(pk=task.pk).update(state=states[name], finished_at=timezone.now())
    pipeline.finish_if_done("scheduler")


# --- submit ---------------------------------------------------------------------------------


def test_submit_recognises_a_pipeline_and_prints_its_id(alice, argus_as, pipeline_file):
    result = argus_as(alice).run("submit", str(pipeline_file))
    assert result.returncode == 0, result.stderr
    pipeline = Pipeline.objects.get()
    assert result.stdout == f"{pipeline.pipeline_id}\n"
    assert (pipeline.user, pipeline.name, pipeline.document) == (alice, "qwen-sft-grpo", DOCUMENT)
    steps = steps_of(pipeline)
    assert [steps[name].state for name in ("sft", "sft-export", "grpo")] == [S.QUEUED, S.WAITING, S.WAITING]
    assert not Task.objects.filter(pipeline=None).exists()


def test_submit_json_answers_the_pipeline_with_its_steps(alice, argus_as, datasets):
    # A JSON document on standard input is recognised too.
    document = json.dumps({"steps": [SFT, EXPORT]})
    result = argus_as(alice).run("submit", "-", "--json", input=document)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    pipeline = Pipeline.objects.get()
    assert set(body) == {"pipeline_id", "name", "state", "user", "created_at", "finished_at", "steps"}
    assert (body["pipeline_id"], body["state"], body["user"]) == (pipeline.pipeline_id, "RUNNING", "alice")
    steps = steps_of(pipeline)
    assert body["steps"] == [
        {"name": "sft", "task_id": steps["sft"].task_id, "state": "QUEUED"},
        {"name": "sft-export", "task_id": steps["sft-export"].task_id, "state": "WAITING"},
    ]


def test_a_bad_pipeline_names_each_step_and_field(alice, argus_as, tmp_path, datasets):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"steps": [SFT, EXPORT, {**GRPO, "nnodes": 0, "colour": "blue"}]}))
    result = argus_as(alice).run("submit", str(bad))
    assert result.returncode == 3
    no_traceback(result)
    for field in ("steps.grpo.nnodes", "steps.grpo.colour"):
        assert f"  {field}: " in result.stderr, result.stderr
    assert not Pipeline.objects.exists() and not Task.objects.exists()


def test_a_task_spec_is_still_a_task(alice, argus_as, datasets, tmp_path):
    from tests.conftest import PPO_SPEC

    spec = tmp_path / "ppo.yaml"
    spec.write_text("# steps: a comment is not a key\n" + PPO_SPEC)
    result = argus_as(alice).run("submit", str(spec))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{Task.objects.get().task_id}\n" and not Pipeline.objects.exists()


# --- ls, show -------------------------------------------------------------------------------


def test_ls_lists_your_pipelines_with_their_progress(alice, bob, argus_as, datasets):
    mine = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    theirs = submit_pipeline(bob, DOCUMENT, actor="api:bob")
    Task.objects.filter(pk=steps_of(mine)["sft"].pk).update(state=S.SUCCEEDED)
    result = argus_as(alice).run("pipeline", "ls")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split() == [
        "PIPELINE",
        "NAME",
        "STATE",
        "USER",
        "CREATED",
        "FINISHED",
        "STEPS",
    ]
    assert mine.pipeline_id in result.stdout and theirs.pipeline_id not in result.stdout
    assert "1/3 succeeded; sft-export WAITING; grpo WAITING" in result.stdout

    rows = json.loads(argus_as(alice).run("pipeline", "ls", "--json").stdout)
    assert [row["pipeline_id"] for row in rows] == [mine.pipeline_id]
    assert [step["name"] for step in rows[0]["steps"]] == ["sft", "sft-export", "grpo"]


def test_ls_with_nothing_says_so(alice, argus_as):
    result = argus_as(alice).run("pipeline", "ls")
    assert result.returncode == 0 and result.stderr == "No pipelines.\n"


def test_show_gives_each_steps_task_state_and_reason(alice, argus_as, datasets):
    pipeline = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    steps = steps_of(pipeline)
    reason = f"waits for {steps['sft'].task_id}, QUEUED"
    queue_reasons.write({steps["sft-export"].pk: reason}, states=[S.WAITING])
    result = argus_as(alice).run("pipeline", "show", pipeline.pipeline_id)
    assert result.returncode == 0, result.stderr
    assert f"pipeline  {pipeline.pipeline_id}" in result.stdout and "state     RUNNING" in result.stdout
    export_line = next(line for line in result.stdout.splitlines() if line.startswith("sft-export "))
    assert steps["sft-export"].task_id in export_line and "WAITING" in export_line and reason in export_line

    body = json.loads(argus_as(alice).run("pipeline", "show", pipeline.pipeline_id, "--json").stdout)
    assert body["pipeline_id"] == pipeline.pipeline_id and body["state"] == "RUNNING"
    assert set(body["steps"][1]) == {
        "name",
        "task_id",
        "state",
        "workload",
        "after",
        "after_any",
        "reason",
        "created_at",
        "queued_at",
        "finished_at",
        "result_metrics",
    }
    assert (body["steps"][1]["after"], body["steps"][1]["reason"]) == (["sft"], reason)


def test_another_users_pipeline_is_not_found(alice, bob, argus_as, datasets):
    pipeline = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    for args in (("show",), ("cancel",), ("retry",)):
        result = argus_as(bob).run("pipeline", *args, pipeline.pipeline_id)
        assert result.returncode == 3, result
        no_traceback(result)
        assert result.stderr.startswith("error: ")
    pipeline.refresh_from_db()
    assert pipeline.state == PipelineState.RUNNING and not Task.objects.filter(state=S.CANCELED).exists()


# --- cancel, retry --------------------------------------------------------------------------


def test_cancel_cancels_every_unfinished_step(alice, argus_as, datasets):
    pipeline = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    result = argus_as(alice).run("pipeline", "cancel", pipeline.pipeline_id)
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"{pipeline.pipeline_id}: CANCELED\n"
    assert {task.state for task in steps_of(pipeline).values()} == {S.CANCELED}
    # Once more: it has ended, which the server says.
    again = argus_as(alice).run("pipeline", "cancel", pipeline.pipeline_id, "--json")
    assert again.returncode == 3 and "is already CANCELED" in again.stderr


def test_cancel_json_answers_the_pipeline(alice, argus_as, datasets):
    pipeline = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    body = json.loads(argus_as(alice).run("pipeline", "cancel", pipeline.pipeline_id, "--json").stdout)
    assert body["state"] == "CANCELED" and {step["state"] for step in body["steps"]} == {"CANCELED"}


def test_retry_reruns_what_did_not_succeed(alice, argus_as, datasets):
    pipeline = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    argus = argus_as(alice)
    refused = argus.run("pipeline", "retry", pipeline.pipeline_id)
    assert refused.returncode == 3 and "is still running" in refused.stderr
    before = steps_of(pipeline)
    end_steps(pipeline, sft=S.SUCCEEDED, **{"sft-export": S.FAILED, "grpo": S.CANCELED})
    result = argus.run("pipeline", "retry", pipeline.pipeline_id)
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"{pipeline.pipeline_id}: RUNNING again; new tasks for sft-export, grpo\n"
    after = steps_of(pipeline)
    assert after["sft"] == before["sft"] and after["sft-export"] != before["sft-export"]

    end_steps(pipeline, sft=S.SUCCEEDED, **{"sft-export": S.SUCCEEDED, "grpo": S.FAILED})
    body = json.loads(argus.run("pipeline", "retry", pipeline.pipeline_id, "--json").stdout)
    assert body["state"] == "RUNNING"
    assert [(step["name"], step["state"]) for step in body["steps"]] == [
        ("sft", "SUCCEEDED"),
        ("sft-export", "SUCCEEDED"),
        ("grpo", "WAITING"),
    ]


# --- --follow -------------------------------------------------------------------------------


def collect(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


def test_follow_follows_each_step_in_turn_and_exits_0_when_it_succeeded(alice, argus_as, pipeline_file, tmp_path):
    process = argus_as(alice).start("submit", str(pipeline_file), "--follow", "--interval", "0.2")
    pipeline = wait_for(lambda: Pipeline.objects.first(), "the CLI's pipeline", timeout=20, interval=0.05)
    steps = steps_of(pipeline)
    seen = "".join(
        run_step(process, steps[name], tmp_path / f"{name}.log", f"{name} starting\n{name} done\n", S.SUCCEEDED)
        for name in ("sft", "sft-export", "grpo")
    )
    returncode, out, err = collect(process)
    assert returncode == 0, err
    assert (seen + out).splitlines() == [
        pipeline.pipeline_id,
        "sft starting",
        "sft done",
        "sft-export starting",
        "sft-export done",
        "grpo starting",
        "grpo done",
    ]
    for name in ("sft", "sft-export", "grpo"):
        assert f"step {name}: {steps[name].task_id}" in err
        assert f"{steps[name].task_id}: SUCCEEDED" in err
    assert err.rstrip().endswith(f"{pipeline.pipeline_id}: SUCCEEDED")


def test_follow_exits_1_when_a_step_failed(alice, argus_as, pipeline_file, tmp_path):
    process = argus_as(alice).start("submit", str(pipeline_file), "--follow", "--interval", "0.2")
    pipeline = wait_for(lambda: Pipeline.objects.first(), "the CLI's pipeline", timeout=20, interval=0.05)
    steps = steps_of(pipeline)
    seen = run_step(
        process, steps["sft"], tmp_path / "sft.log", "sft starting\n", S.FAILED, error_summary="RuntimeError: boom"
    )
    # The scheduler cancels the steps after it, unrun.
    for name, after in (("sft-export", "sft"), ("grpo", "sft-export")):
        task = Task.objects.get(pk=steps[name].pk)
        reason = f"its dependency {steps[after].task_id} {Task.objects.get(pk=steps[after].pk).state}"
        task.transition(S.CANCELED, role=Role.SCHEDULER, actor="scheduler", error_summary=reason)
    returncode, out, err = collect(process)
    assert returncode == 1, err
    assert (seen + out).splitlines()[:2] == [pipeline.pipeline_id, "sft starting"]
    assert f"{steps['sft'].task_id}: FAILED (RuntimeError: boom)" in err
    assert f"{steps['grpo'].task_id}: CANCELED (its dependency {steps['sft-export'].task_id} CANCELED)" in err
    assert err.rstrip().endswith(f"{pipeline.pipeline_id}: FAILED")


def test_submit_sends_a_json_pipeline_as_json(alice, argus_as, datasets):
    # Tab-indented JSON is no YAML: sent as JSON, it is a pipeline all the same.
    result = argus_as(alice).run("submit", "-", input=json.dumps({"steps": [SFT, EXPORT]}, indent="\t"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{Pipeline.objects.get().pipeline_id}\n" and Task.objects.count() == 2
