"""The pipeline pages in a real browser: submit the template from the new-task page, the graph of
steps, cancel, retry, the list, the task page's link, and others' pipelines.

The ``page`` fixture fails a test whose page sent a request anywhere but the live server, or
logged a console error (every CSP violation is one).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from accounts.homes import home_dir
from tasks.choices import PipelineState, TaskState
from tasks.models import Task
from tasks.pipelines.actions import submit_pipeline
from tasks.pipelines.models import Pipeline
from tests.web.helpers import PageWatch, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
S = TaskState

TRAIN = {
    "nnodes": 1,
    "n_gpus_per_node": 4,
    "train_file": "$HOME/common/datasets/gsm8k/train.parquet",
    "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
}
DOCUMENT = yaml.safe_dump(
    {
        "name": "qwen-sft-grpo",
        "steps": [
            {"name": "sft", "workload": "sft", "model_id": "Qwen/Qwen2.5-0.5B-Instruct", **TRAIN},
            {"name": "sft-export", "workload": "export", "checkpoint": "${steps.sft.checkpoint}"},
            {"name": "grpo", "workload": "grpo", "model_id": "${steps.sft-export.hf_model}", **TRAIN},
        ],
    },
    sort_keys=False,
)


@pytest.fixture
def sft_data(alice: User, datasets: Path) -> None:
    """The user's own SFT files the pipeline template reads."""
    sft = home_dir("alice") / "datasets" / "sft"
    sft.mkdir(parents=True)
    for name in ("train.parquet", "val.parquet"):
        (sft / name).write_bytes(b"PAR1")


def steps_of(pipeline: Pipeline) -> dict[str, Task]:
    return {step.name: step.task for step in pipeline.steps.select_related("task")}


def test_it_submits_the_pipeline_template_and_shows_its_steps(signed_in_page: Page, sft_data: None) -> None:
    page = signed_in_page
    page.get_by_role("link", name="New task").first.click()
    page.get_by_role("button", name="SFT → export → GRPO → export").click()
    spec = page.get_by_label("Spec (YAML)")
    expect(spec).to_have_value(re.compile(r"^# A pipeline: SFT, export"))
    expect(spec).to_have_value(re.compile(r"model_id: \$\{steps\.sft-export\.hf_model\}"))
    shot(page, "pipeline-new")
    page.get_by_role("button", name="Submit task").click()

    pipeline = Pipeline.objects.get()
    expect(page).to_have_url(re.compile(rf"/pipelines/{pipeline.pipeline_id}/$"))
    expect(page.locator(".message-success")).to_contain_text(f"Pipeline {pipeline.pipeline_id} is submitted: 4 steps")
    expect(page.locator("h1")).to_contain_text(pipeline.pipeline_id)
    steps = steps_of(pipeline)
    graph = page.locator("[data-dag]")
    for name in ("sft", "sft-export", "grpo", "grpo-export"):
        expect(graph.locator(f"[data-step='{name}']")).to_be_visible()
    expect(graph.locator("[data-step='sft']")).to_contain_text("Queued")
    expect(graph.locator("[data-step='grpo']")).to_contain_text("Waiting")
    expect(graph.locator("[data-step='grpo']")).to_contain_text("waits for sft-export")
    # Joined by their dependencies, a chain: each box to the right of the one it runs after.
    edges = graph.locator("path[data-edge]")
    expect(edges).to_have_count(3)
    assert [edges.nth(i).get_attribute("data-edge") for i in range(3)] == [
        "sft->sft-export",
        "sft-export->grpo",
        "grpo->grpo-export",
    ]
    boxes = [graph.locator(f"[data-step='{name}']").bounding_box() for name in ("sft", "sft-export", "grpo")]
    assert all(box is not None for box in boxes)
    assert boxes[0]["x"] + boxes[0]["width"] < boxes[1]["x"] < boxes[2]["x"]  # type: ignore[index]
    # Each box links its task.
    shot(page, "pipeline-submitted")
    page.get_by_role("link", name=f"Step grpo: task {steps['grpo'].task_id}").click()
    expect(page).to_have_url(re.compile(rf"/tasks/{steps['grpo'].task_id}/$"))
    expect(page.locator("#task-status")).to_contain_text("Held for its dependencies")


def test_a_bad_pipeline_names_the_step_and_field(signed_in_page: Page, page_watch: PageWatch, datasets: Path) -> None:
    page = signed_in_page
    page_watch.allow_console_error(r"status of 400 \(Bad Request\)")
    page.goto("/tasks/new/")
    document = yaml.safe_load(DOCUMENT)
    document["steps"][2]["nnodes"] = 0
    text = yaml.safe_dump(document, sort_keys=False)
    page.get_by_label("Spec (YAML)").fill(text)
    page.get_by_label("Spec (YAML)").press("Control+Enter")
    errors = page.get_by_role("alert")
    expect(errors).to_contain_text("The pipeline was not submitted")
    expect(errors.locator("li[data-field='steps.grpo.nnodes']")).to_contain_text("between 1 and 1024")
    expect(page.get_by_label("Spec (YAML)")).to_have_value(text)
    assert not Pipeline.objects.exists()
    shot(page, "pipeline-new-invalid")


def test_it_cancels_a_pipeline_after_confirming(signed_in_page: Page, alice: User, datasets: Path) -> None:
    page = signed_in_page
    pipeline = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    page.goto(f"/pipelines/{pipeline.pipeline_id}/")
    page.get_by_role("button", name="Cancel pipeline").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_contain_text(f"Cancel pipeline {pipeline.pipeline_id}?")
    shot(page, "pipeline-cancel-confirm")
    dialog.get_by_role("button", name="Cancel", exact=True).click()
    expect(dialog).not_to_be_visible()
    pipeline.refresh_from_db()
    assert pipeline.state == PipelineState.RUNNING

    page.get_by_role("button", name="Cancel pipeline").click()
    dialog.get_by_role("button", name="Yes, cancel it").click()
    expect(page.locator(".message-success")).to_contain_text(f"Pipeline {pipeline.pipeline_id} is canceled")
    expect(page.locator("[data-pipeline-state]")).to_contain_text("Canceled")
    expect(page.get_by_role("button", name="Cancel pipeline")).to_have_count(0)
    expect(page.get_by_role("button", name="Retry pipeline")).to_be_visible()
    pipeline.refresh_from_db()
    assert pipeline.state == PipelineState.CANCELED
    assert {task.state for task in steps_of(pipeline).values()} == {S.CANCELED}


def test_a_failed_pipeline_is_retried_from_its_page(signed_in_page: Page, alice: User, datasets: Path) -> None:
    page = signed_in_page
    pipeline = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    before = steps_of(pipeline)
    page.goto(f"/pipelines/{pipeline.pipeline_id}/")
    expect(page.get_by_role("button", name="Retry pipeline")).to_have_count(0)
    # The scheduler's part: SFT succeeds, the export fails, GRPO is canceled unrun. The page,
    # polling while the pipeline runs, shows the end by itself.
    now = timezone.now()
    Task.objects.filter(pk=before["sft"].pk).update(state=S.SUCCEEDED, finished_at=now)
    Task.objects.filter(pk=before["sft-export"].pk).update(state=S.FAILED, finished_at=now, error_summary="no config")
    Task.objects.filter(pk=before["grpo"].pk).update(state=S.CANCELED, finished_at=now)
    pipeline.finish_if_done("scheduler")
    expect(page.locator("[data-pipeline-state]")).to_contain_text("Failed", timeout=8000)
    expect(page.locator("[data-step-row='sft-export']")).to_contain_text("no config")
    shot(page, "pipeline-failed")

    page.get_by_role("button", name="Retry pipeline").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Yes, retry").click()
    expect(page.locator(".message-success")).to_contain_text("new tasks for sft-export, grpo; sft succeeded")
    expect(page.locator("[data-pipeline-state]")).to_contain_text("Running")
    after = steps_of(pipeline)
    assert after["sft"] == before["sft"] and after["sft-export"] != before["sft-export"]
    # A new task for the export, held until the tick sees that sft (reused) has succeeded.
    expect(page.locator("[data-dag] [data-step='sft-export']")).to_contain_text("Waiting")
    expect(page.locator("[data-dag] [data-step='sft-export']")).to_contain_text(after["sft-export"].task_id)
    expect(page.locator("[data-dag] [data-step='sft']")).to_contain_text("Succeeded")
    expect(page.get_by_text("2 earlier tasks of retried steps")).to_be_visible()
    shot(page, "pipeline-retried")


def test_the_list_shows_pipelines_and_leads_to_them(signed_in_page: Page, alice: User, datasets: Path) -> None:
    page = signed_in_page
    first = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    second = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Pipelines").click()
    expect(page).to_have_url(re.compile(r"/pipelines/$"))
    expect(page.locator("tr[data-pipeline]")).to_have_count(2)
    row = page.locator(f"tr[data-pipeline='{first.pipeline_id}']")
    expect(row).to_contain_text("qwen-sft-grpo")
    expect(row.get_by_role("list", name=f"Steps of {first.pipeline_id}")).to_contain_text("sft-export")
    shot(page, "pipelines")
    # States update by themselves.
    Pipeline.objects.filter(pk=second.pk).update(state=PipelineState.FAILED)
    expect(page.locator(f"tr[data-pipeline='{second.pipeline_id}']")).to_contain_text("Failed", timeout=8000)
    page.get_by_role("link", name=re.compile("Failed")).click()
    expect(page.locator("tr[data-pipeline]")).to_have_count(1)
    page.get_by_role("link", name=second.pipeline_id).click()
    expect(page).to_have_url(re.compile(rf"/pipelines/{second.pipeline_id}/$"))


def test_a_task_page_links_its_pipeline(signed_in_page: Page, alice: User, datasets: Path) -> None:
    page = signed_in_page
    pipeline = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    export = steps_of(pipeline)["sft-export"]
    page.goto(f"/tasks/{export.task_id}/")
    expect(page.locator("[data-pipeline-facts]")).to_contain_text("step sft-export of pipeline")
    page.get_by_role("link", name=pipeline.pipeline_id).click()
    expect(page).to_have_url(re.compile(rf"/pipelines/{pipeline.pipeline_id}/$"))


def test_another_users_pipeline_is_a_404_page(
    page: Page, page_watch: PageWatch, alice: User, bob: User, datasets: Path
) -> None:
    pipeline = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    page_watch.allow_console_error(r"404 \(Not Found\)")
    sign_in(page, "bob")
    response = page.goto(f"/pipelines/{pipeline.pipeline_id}/")
    assert response is not None and response.status == 404
    expect(page.locator("h1")).to_have_text("Not found")
    assert pipeline.pipeline_id not in page.content()
    page.goto("/pipelines/")
    expect(page.locator("tr[data-pipeline]")).to_have_count(0)
    expect(page.get_by_text("No pipelines yet.")).to_be_visible()


BRANCHES = yaml.safe_dump(
    {
        "steps": [
            {"name": "sft", "workload": "sft", "model_id": "Qwen/Qwen2.5-0.5B-Instruct", **TRAIN},
            {"name": "export", "workload": "export", "checkpoint": "${steps.sft.checkpoint}"},
            {"name": "ppo", "workload": "ppo", "model_id": "${steps.export.hf_model}", **TRAIN},
            {"name": "grpo", "after": ["export"], "workload": "grpo", "model_id": "${steps.export.hf_model}", **TRAIN},
            {"name": "ppo-export", "after": ["ppo"], "workload": "export", "checkpoint": "${steps.ppo.checkpoint}"},
            {"name": "grpo-export", "after": ["grpo"], "workload": "export", "checkpoint": "${steps.grpo.checkpoint}"},
            # Two branches joining: after one, however the other ends.
            {
                "name": "again",
                "after": ["ppo-export"],
                "after_any": ["grpo-export"],
                "workload": "export",
                "checkpoint": "${steps.ppo.checkpoint}",
            },
        ]
    },
    sort_keys=False,
)


@pytest.mark.parametrize("state", ["running", "failed", "branches"])
def test_every_pipeline_page_renders_cleanly(signed_in_page: Page, alice: User, datasets: Path, state: str) -> None:
    page = signed_in_page
    pipeline = submit_pipeline(alice, BRANCHES if state == "branches" else DOCUMENT, actor="api:alice")
    if state == "failed":
        for step in pipeline.steps.select_related("task"):
            ended = S.FAILED if step.name == "sft" else S.CANCELED
            Task.objects.filter(pk=step.task.pk).update(state=ended, finished_at=timezone.now())
        pipeline.finish_if_done("scheduler")
    response = page.goto(f"/pipelines/{pipeline.pipeline_id}/")
    assert response is not None and response.status == 200
    expect(page.locator("h1")).to_be_visible()
    # Every box inside the drawing, none on top of another.
    graph = page.locator("[data-dag]").bounding_box()
    boxes = [box.bounding_box() for box in page.locator("[data-dag] [data-step]").all()]
    assert graph is not None and boxes and all(box is not None for box in boxes)
    for index, box in enumerate(boxes):
        assert box is not None
        assert graph["x"] <= box["x"] and box["x"] + box["width"] <= graph["x"] + graph["width"] + 1
        assert graph["y"] <= box["y"] and box["y"] + box["height"] <= graph["y"] + graph["height"] + 1
        for other in boxes[index + 1 :]:
            assert other is not None
            apart = (
                box["x"] + box["width"] <= other["x"]
                or other["x"] + other["width"] <= box["x"]
                or box["y"] + box["height"] <= other["y"]
                or other["y"] + other["height"] <= box["y"]
            )
            assert apart, (box, other)
    shot(page, f"pipeline-{state}")
