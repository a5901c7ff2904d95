"""A pipeline whose final step evaluates the model its export wrote (SFT -> export -> eval): the
eval's model_id is the export's hf_model, and the pipeline ends with the eval's result, shown by
the task and pipeline APIs and pages (the real-Ray run: tests/scheduler/test_pipelines_on_ray.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client

from accounts.homes import home_dir
from tasks.choices import PipelineState, TaskState
from tasks.jobfiles import job_root, metrics_log
from tasks.models import Task
from tasks.pipelines.actions import submit_pipeline
from tasks.pipelines.document import parse_pipeline
from tasks.scheduler.tick import tick
from tests.conftest import EVAL, EVAL_PIPELINE, SFT
from tests.tasks.pipelines.test_pipelines import checkpoint, post, problems, steps_of, succeed

pytestmark = pytest.mark.django_db
S = TaskState

RESULT = {"val-aux/openai/gsm8k/reward/mean@1": 0.5, "val-core/openai/gsm8k/acc/mean@1": 0.625}


def test_an_evals_model_may_be_an_exports_hf_model(alice, datasets):
    parsed = parse_pipeline(yaml.safe_dump(EVAL_PIPELINE), username="alice")
    evaluation = parsed.steps[2]
    assert (evaluation.name, evaluation.after) == ("eval", ("sft-export",))
    assert evaluation.parsed.resolved.model_id == "${steps.sft-export.hf_model}"
    assert evaluation.parsed.resolved.workload == "eval"


DOCS = Path(__file__).resolve().parents[3] / "docs" / "pipelines.md"


def test_the_docs_evaluation_example_is_a_valid_pipeline(alice, datasets, shared_root):
    text = DOCS.read_text()
    start = text.index("  ```yaml\n  steps:") + len("  ```yaml\n")
    example = "\n".join(line[2:] for line in text[start : text.index("  ```\n", start)].splitlines())
    for name in ("train.parquet", "val.parquet"):
        (shared_root / "users" / "alice" / "datasets" / "sft" / name).parent.mkdir(parents=True, exist_ok=True)
        (shared_root / "users" / "alice" / "datasets" / "sft" / name).write_bytes(b"PAR1")
    evaluation = parse_pipeline(example, username="alice").steps[2]
    assert evaluation.parsed.resolved.overrides == (
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.val_kwargs.n=4",
    )


def test_an_evals_model_is_no_training_steps_hf_model(alice, datasets):
    fields = problems({"steps": [SFT, {**EVAL, "model_id": "${steps.sft.hf_model}"}]})
    assert fields == {"steps.eval.model_id": ["${steps.sft.hf_model}: only an export step writes a Hugging Face model"]}


def test_an_eval_refuses_a_training_key_in_a_pipeline_too(alice, datasets):
    fields = problems({"steps": [{**EVAL, "model_id": "Qwen/Qwen2.5-0.5B-Instruct", "total_epochs": 2}]})
    assert fields == {"steps.eval.total_epochs": ["is only for workload ppo or grpo or sft specs, not eval"]}


def entrypoint(task: Task) -> str:
    payload = json.loads((job_root("alice", f"{task.task_id}--a01") / "submission.json").read_text())
    return str(payload["entrypoint"])


def test_the_pipeline_ends_with_the_evals_result(alice, client_for, datasets, fake_ray, client: Client):
    ray = fake_ray([4, 4])
    api = client_for(alice)
    pipeline_id = post(api, EVAL_PIPELINE).json()["pipeline_id"]
    tick()
    steps = steps_of(pipeline_id)
    assert steps["eval"].task_id.startswith("alice-eval-")
    checkpoint(steps["sft"], 2)
    succeed(ray, steps["sft"])
    tick()
    export = Task.objects.get(pk=steps["sft-export"].pk)
    hf_model = home_dir("alice") / "jobs" / export.task_id / "hf_model"
    hf_model.mkdir(parents=True)
    (hf_model / "config.json").write_text("{}")
    succeed(ray, export)
    tick()
    evaluation = Task.objects.get(pk=steps["eval"].pk)
    assert evaluation.state == S.SUBMITTED and evaluation.spec["model_id"] == str(hf_model)
    command = entrypoint(evaluation)
    assert f"actor_rollout_ref.model.path={hf_model}" in command
    assert "trainer.val_before_train=True trainer.val_only=True trainer.resume_mode=disable" in command
    attempt = evaluation.attempts.get()
    path = Path(metrics_log(evaluation, attempt))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"step": 0, "data": {**RESULT, "timing_s/testing": 4.5}}) + "\n")
    succeed(ray, evaluation)
    tick()

    detail = api.get(f"/api/v2/pipelines/{pipeline_id}").json()
    assert detail["state"] == PipelineState.SUCCEEDED
    assert [step["result_metrics"] for step in detail["steps"]] == [{}, {}, RESULT]
    assert api.get(f"/api/v2/tasks/{evaluation.task_id}").json()["result_metrics"] == RESULT
    listed: list[dict[str, Any]] = api.get("/api/v2/tasks?workload=eval").json()["results"]
    assert [(row["task_id"], row["result_metrics"]) for row in listed] == [(evaluation.task_id, RESULT)]

    client.force_login(alice)
    page = client.get(f"/pipelines/{pipeline_id}/").content.decode()
    row = page[page.index('data-step-row="eval"') :]
    row = row[: row.index("</table>")]  # the step row and the result table in its details
    assert 'data-metric="val-core/openai/gsm8k/acc/mean@1"' in row and ">0.625<" in row
    assert 'data-step-row="sft"' in page and page.count("data-result-metrics") == 1
    task_page = client.get(f"/tasks/{evaluation.task_id}/").content.decode()
    assert 'id="result-title"' in task_page
    assert 'data-metric="val-aux/openai/gsm8k/reward/mean@1"' in task_page and ">0.5<" in task_page
    assert 'id="result-title"' not in client.get(f"/tasks/{export.task_id}/").content.decode()


def test_a_step_with_many_metrics_shows_its_core_ones_and_links_the_rest(alice, datasets, client: Client):
    # verl logs dozens of metrics per data source once val_kwargs.n > 1 (std, best@k, worst@k,
    # maj@k…): the pipeline's row (polled every few seconds) shows the core ones, the task page all.
    submitted = submit_pipeline(alice, EVAL_PIPELINE, actor="api:alice")
    evaluation = submitted.steps.get(name="eval").task
    many = {f"val-aux/source{i}/reward/best@{k}/mean": 0.5 for i in range(10) for k in (2, 4, 8)}
    many |= {f"val-core/source{i}/reward/mean@8": 0.25 for i in range(3)}
    Task.objects.filter(pk=evaluation.pk).update(state=TaskState.SUCCEEDED, result_metrics=many)
    client.force_login(alice)
    page = client.get(f"/pipelines/{submitted.pipeline_id}/").content.decode()
    row = page[page.index('data-step-row="eval"') :]
    row = row[: row.index("</tr>", row.index("</table>"))]
    found = {name: row.find(f'data-metric="{name}"') for name in many}
    shown = sorted((name for name, at in found.items() if at >= 0), key=found.__getitem__)
    assert shown[:3] == [f"val-core/source{i}/reward/mean@8" for i in range(3)] and len(shown) == 8
    assert f'href="/tasks/{evaluation.task_id}/#result-title" data-result-more>all 33 metrics' in row
    task_page = client.get(f"/tasks/{evaluation.task_id}/").content.decode()
    assert all(f'data-metric="{name}"' in task_page for name in many)
