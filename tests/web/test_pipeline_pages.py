"""The pipeline pages through Django's test client: who may see and act on what, the page's
graph and table, cancel and retry, the new-task form taking a pipeline document, and the task
page's link to its pipeline (the browser: tests/web/test_pipeline_browser.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from accounts.homes import home_dir
from accounts.models import UserLimits
from tasks.choices import PipelineState, TaskState
from tasks.models import Task
from tasks.pipelines.actions import submit_pipeline
from tasks.pipelines.document import is_pipeline_document, parse_pipeline
from tasks.pipelines.models import Pipeline
from tasks.pipelines.web.graph import BOX_H, BOX_W, GAP_X, PAD, layout
from tasks.queue import reasons as queue_reasons
from tasks.submit import submit_spec
from tasks.web.views import PIPELINE_TEMPLATES
from tests.conftest import EXPORT, GRPO, PIPELINE_YAML, PPO_SPEC, SFT

pytestmark = pytest.mark.django_db
S = TaskState

DOCUMENT = PIPELINE_YAML


def text_of(response: Any) -> str:
    return response.content.decode()


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


@pytest.fixture
def pipeline(alice: User, datasets: Path) -> Pipeline:
    return submit_pipeline(alice, DOCUMENT, actor="api:alice")


def steps_of(pipeline: Pipeline) -> dict[str, Task]:
    return {step.name: step.task for step in pipeline.steps.select_related("task")}


def end(pipeline: Pipeline, **states: str) -> None:
    """The steps' tasks ended as ``states`` say (name -> state), and the pipeline with them."""
    for name, task in steps_of(pipeline).items():
        Task.objects.filter(pk=task.pk).update(state=states[name], finished_at=timezone.now())
    pipeline.finish_if_done("scheduler")
    pipeline.refresh_from_db()


# --- who may see what ----------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/pipelines/", "/pipelines/{pipeline_id}/"])
def test_signed_out_visitors_are_sent_to_sign_in(client: Client, pipeline: Pipeline, url: str) -> None:
    url = url.format(pipeline_id=pipeline.pipeline_id)
    response = client.get(url)
    assert response.status_code == 302 and response["Location"] == f"/login/?next={url}"


@pytest.mark.parametrize("action", ["cancel", "retry"])
def test_signed_out_visitors_cannot_act(client: Client, pipeline: Pipeline, action: str) -> None:
    response = client.post(f"/pipelines/{pipeline.pipeline_id}/{action}/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert Task.objects.filter(state=S.CANCELED).count() == 0


def test_another_users_pipeline_is_a_404_page(client: Client, bob: User, pipeline: Pipeline) -> None:
    client.force_login(bob)
    response = client.get(f"/pipelines/{pipeline.pipeline_id}/")
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in text_of(response) and pipeline.pipeline_id not in text_of(response)


def test_another_users_pipeline_cannot_be_canceled_or_retried(client: Client, bob: User, pipeline: Pipeline) -> None:
    client.force_login(bob)
    assert client.post(f"/pipelines/{pipeline.pipeline_id}/cancel/").status_code == 404
    assert not Task.objects.filter(state=S.CANCELED).exists()
    end(pipeline, sft=S.FAILED, **{"sft-export": S.CANCELED, "grpo": S.CANCELED})
    assert client.post(f"/pipelines/{pipeline.pipeline_id}/retry/").status_code == 404
    assert Task.objects.count() == 3


def test_a_user_lists_only_their_own_pipelines(as_alice: Client, bob: User, pipeline: Pipeline) -> None:
    theirs = submit_pipeline(bob, DOCUMENT, actor="api:bob")
    page = text_of(as_alice.get("/pipelines/"))
    assert pipeline.pipeline_id in page and theirs.pipeline_id not in page
    assert '<th scope="col">User</th>' not in page


def test_an_admin_sees_everyones_pipelines(client: Client, admin: User, bob: User, pipeline: Pipeline) -> None:
    theirs = submit_pipeline(bob, DOCUMENT, actor="api:bob")
    client.force_login(admin)
    page = text_of(client.get("/pipelines/"))
    assert '<th scope="col">User</th>' in page
    assert pipeline.pipeline_id in page and theirs.pipeline_id in page
    detail = client.get(f"/pipelines/{pipeline.pipeline_id}/")
    assert detail.status_code == 200 and "by alice" in text_of(detail)


def test_the_nav_links_the_pipelines(as_alice: Client) -> None:
    page = text_of(as_alice.get("/pipelines/"))
    assert '<a href="/pipelines/" aria-current="page">Pipelines</a>' in page


# --- the list ------------------------------------------------------------------------------


def test_the_list_shows_each_pipelines_state_and_steps(as_alice: Client, pipeline: Pipeline) -> None:
    page = text_of(as_alice.get("/pipelines/"))
    row = page[page.index(f'<tr data-pipeline="{pipeline.pipeline_id}">') :]
    row = row[: row.index("</tr>")]
    assert "qwen-sft-grpo" in row and "Running" in row
    assert re.findall(r'class="step-chip status-(\w+)" title="([^"]+)"', row) == [
        ("queued", "sft: Queued"),
        ("waiting", "sft-export: Waiting"),
        ("waiting", "grpo: Waiting"),
    ]


def test_the_list_filters_by_state(as_alice: Client, alice: User, pipeline: Pipeline) -> None:
    other = submit_pipeline(alice, DOCUMENT, actor="api:alice")
    end(other, sft=S.FAILED, **{"sft-export": S.CANCELED, "grpo": S.CANCELED})
    page = text_of(as_alice.get("/pipelines/?state=FAILED"))
    assert other.pipeline_id in page and pipeline.pipeline_id not in page
    assert re.search(r'id="filter-failed" href="\?state=FAILED" aria-current="true"', page)
    empty = text_of(as_alice.get("/pipelines/?state=SUCCEEDED"))
    assert "No succeeded pipelines." in empty


def test_an_empty_list_says_how_to_submit_one(as_alice: Client) -> None:
    assert "No pipelines yet." in text_of(as_alice.get("/pipelines/"))


def test_the_list_costs_the_same_queries_for_many_pipelines(
    as_alice: Client, alice: User, pipeline: Pipeline, django_assert_max_num_queries
) -> None:
    for _ in range(5):
        submit_pipeline(alice, DOCUMENT, actor="api:alice")
    # Session, user, the page's pipelines, their steps with tasks, the count and the state counts.
    with django_assert_max_num_queries(8):
        assert as_alice.get("/pipelines/").status_code == 200


# --- a pipeline's page ---------------------------------------------------------------------


def test_the_page_draws_each_step_joined_to_those_it_runs_after(as_alice: Client, pipeline: Pipeline) -> None:
    response = as_alice.get(f"/pipelines/{pipeline.pipeline_id}/")
    page = text_of(response)
    assert response.status_code == 200
    steps = steps_of(pipeline)
    for name, task in steps.items():
        assert f'data-step="{name}"' in page
        assert f'href="/tasks/{task.task_id}/" aria-label="Step {name}: task {task.task_id}"' in page
    assert re.findall(r'data-edge="([^"]+)"', page) == ["sft->sft-export", "sft-export->grpo"]
    assert "Cancel pipeline" in page and "Retry pipeline" not in page
    # The live part polls while it runs; the document is there as it was sent.
    assert 'hx-get="/pipelines/' in page and escape("${steps.sft.checkpoint}") in page
    assert "waits for sft" in page  # the export's box: what it waits for


def test_the_page_says_why_a_step_waits_and_how_one_ended(as_alice: Client, pipeline: Pipeline) -> None:
    steps = steps_of(pipeline)
    queue_reasons.write({steps["sft-export"].pk: f"waits for {steps['sft'].task_id}, QUEUED"}, states=[S.WAITING])
    Task.objects.filter(pk=steps["sft"].pk).update(state=S.FAILED, error_summary="CUDA out of memory")
    page = text_of(as_alice.get(f"/pipelines/{pipeline.pipeline_id}/"))
    assert f"waits for {steps['sft'].task_id}, QUEUED" in page
    assert '<span class="error-text">CUDA out of memory</span>' in page


def test_a_finished_pipeline_offers_retry_and_stops_polling(as_alice: Client, pipeline: Pipeline) -> None:
    end(pipeline, sft=S.SUCCEEDED, **{"sft-export": S.FAILED, "grpo": S.CANCELED})
    page = text_of(as_alice.get(f"/pipelines/{pipeline.pipeline_id}/"))
    assert "Retry pipeline" in page and "Cancel pipeline" not in page
    assert "hx-trigger" not in page[page.index('id="pipeline-live"') :][:400]
    assert "A step failed" in page


def test_a_succeeded_pipeline_offers_neither(as_alice: Client, pipeline: Pipeline) -> None:
    end(pipeline, sft=S.SUCCEEDED, **{"sft-export": S.SUCCEEDED, "grpo": S.SUCCEEDED})
    page = text_of(as_alice.get(f"/pipelines/{pipeline.pipeline_id}/"))
    assert "Every step succeeded" in page
    assert "Retry pipeline" not in page and "Cancel pipeline" not in page


def test_the_page_polls_for_its_live_part_only(as_alice: Client, pipeline: Pipeline) -> None:
    response = as_alice.get(f"/pipelines/{pipeline.pipeline_id}/", HTTP_HX_REQUEST="true")
    part = text_of(response)
    assert part.lstrip().startswith("<section") or 'id="pipeline-live"' in part[:600]
    assert "<html" not in part and "Document" not in part
    assert "HX-Request" in response["Vary"]


def test_the_page_costs_few_queries(as_alice: Client, pipeline: Pipeline, django_assert_max_num_queries) -> None:
    with django_assert_max_num_queries(9):
        assert as_alice.get(f"/pipelines/{pipeline.pipeline_id}/").status_code == 200


# --- cancel and retry ----------------------------------------------------------------------


def test_cancel_cancels_every_unfinished_step(as_alice: Client, pipeline: Pipeline) -> None:
    response = as_alice.post(f"/pipelines/{pipeline.pipeline_id}/cancel/", follow=True)
    assert f"Pipeline {pipeline.pipeline_id} is canceled." in messages_of(response)
    pipeline.refresh_from_db()
    assert pipeline.state == PipelineState.CANCELED
    assert {task.state for task in steps_of(pipeline).values()} == {S.CANCELED}
    assert all(event.actor == "web:alice" for task in steps_of(pipeline).values() for event in task.events.all()[1:])


def test_cancel_of_an_ended_pipeline_says_so(as_alice: Client, pipeline: Pipeline) -> None:
    end(pipeline, sft=S.SUCCEEDED, **{"sft-export": S.SUCCEEDED, "grpo": S.SUCCEEDED})
    response = as_alice.post(f"/pipelines/{pipeline.pipeline_id}/cancel/", follow=True)
    assert messages_of(response) == [
        f"Pipeline {pipeline.pipeline_id} had already ended (succeeded): nothing to cancel."
    ]


@pytest.mark.parametrize("action", ["cancel", "retry"])
def test_cancel_and_retry_want_a_post(as_alice: Client, pipeline: Pipeline, action: str) -> None:
    assert as_alice.get(f"/pipelines/{pipeline.pipeline_id}/{action}/").status_code == 405


def test_retry_reruns_what_did_not_succeed_and_reuses_the_rest(as_alice: Client, pipeline: Pipeline) -> None:
    before = steps_of(pipeline)
    end(pipeline, sft=S.SUCCEEDED, **{"sft-export": S.FAILED, "grpo": S.CANCELED})
    response = as_alice.post(f"/pipelines/{pipeline.pipeline_id}/retry/", follow=True)
    assert messages_of(response) == [
        f"Pipeline {pipeline.pipeline_id} runs again: new tasks for sft-export, grpo; sft succeeded and is reused."
    ]
    pipeline.refresh_from_db()
    after = steps_of(pipeline)
    assert pipeline.state == PipelineState.RUNNING
    assert after["sft"] == before["sft"] and after["sft-export"] != before["sft-export"]
    page = text_of(response)
    assert "2 earlier tasks of retried steps" in page and before["sft-export"].task_id in page


def test_retry_of_a_running_pipeline_is_refused_with_the_reason(as_alice: Client, pipeline: Pipeline) -> None:
    response = as_alice.post(f"/pipelines/{pipeline.pipeline_id}/retry/", follow=True)
    assert messages_of(response) == [
        f"Pipeline {pipeline.pipeline_id} is still running; cancel it or wait for it to end."
    ]
    assert Task.objects.count() == 3


def test_retry_says_which_step_no_longer_passes_its_checks(
    as_alice: Client, pipeline: Pipeline, datasets: Path
) -> None:
    end(pipeline, sft=S.FAILED, **{"sft-export": S.CANCELED, "grpo": S.CANCELED})
    (datasets / "train.parquet").unlink()
    response = as_alice.post(f"/pipelines/{pipeline.pipeline_id}/retry/", follow=True)
    [message] = messages_of(response)
    assert message.startswith(f"Pipeline {pipeline.pipeline_id} was not retried: steps.sft.train_file: ")
    assert Task.objects.count() == 3


# --- the new-task form takes a pipeline document -------------------------------------------


def test_the_form_offers_the_pipeline_template(as_alice: Client) -> None:
    page = text_of(as_alice.get("/tasks/new/"))
    for key, label in PIPELINE_TEMPLATES:
        assert f'data-template="{key}"' in page and f">{label}</button>" in page
        assert f'<script type="text/yaml" id="spec-template-{key}"' in page
    assert "SFT → export → GRPO → export" in page


def test_the_pipeline_template_is_a_valid_document(alice: User, datasets: Path) -> None:
    sft = home_dir("alice") / "datasets" / "sft"
    sft.mkdir(parents=True)
    for name in ("train.parquet", "val.parquet"):
        (sft / name).write_bytes(b"PAR1")
    text = render_to_string("tasks/specs/pipeline.yaml")
    assert is_pipeline_document(text)
    document = parse_pipeline(text, username="alice")
    assert [(s.name, s.parsed.resolved.workload, s.after) for s in document.steps] == [
        ("sft", "sft", ()),
        ("sft-export", "export", ("sft",)),
        ("grpo", "grpo", ("sft-export",)),
        ("grpo-export", "export", ("grpo",)),
    ]
    assert all(step.parsed.warnings == [] for step in document.steps)


def test_a_pipeline_document_is_submitted_and_opens_its_page(as_alice: Client, datasets: Path) -> None:
    response = as_alice.post("/tasks/new/", {"spec": DOCUMENT.replace("\n", "\r\n")})
    pipeline = Pipeline.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/pipelines/{pipeline.pipeline_id}/"
    steps = steps_of(pipeline)
    assert [steps[name].state for name in ("sft", "sft-export", "grpo")] == [S.QUEUED, S.WAITING, S.WAITING]
    assert steps["sft"].events.get().actor == "web:alice"
    assert pipeline.name == "qwen-sft-grpo" and "\r" not in pipeline.document
    page = as_alice.get(response["Location"])
    assert messages_of(page) == [f"Pipeline {pipeline.pipeline_id} is submitted: 3 steps; queued now: sft."]


def test_a_bad_pipeline_comes_back_with_its_text_and_each_step_and_field_named(
    as_alice: Client, datasets: Path
) -> None:
    bad = yaml.safe_dump(
        {"steps": [SFT, {**EXPORT, "checkpoint": "${steps.grpo.checkpoint}"}, {**GRPO, "nnodes": 0}]},
        sort_keys=False,
    )
    response = as_alice.post("/tasks/new/", {"spec": bad})
    page = text_of(response)
    assert response.status_code == 400
    assert "The pipeline was not submitted: one field needs a change." in page
    assert '<li data-field="steps.sft-export.checkpoint"><code>steps.sft-export.checkpoint</code>: ' in page
    assert "which this step does not run after" in page
    assert escape(bad) + "</textarea>" in page and 'aria-invalid="true"' in page
    assert not Task.objects.exists() and not Pipeline.objects.exists()

    # Once the order is right, each step's own spec errors are named by step and field.
    bad = yaml.safe_dump({"steps": [SFT, EXPORT, {**GRPO, "nnodes": 0, "colour": "blue"}]}, sort_keys=False)
    page = text_of(as_alice.post("/tasks/new/", {"spec": bad}))
    for field in ("steps.grpo.nnodes", "steps.grpo.colour"):
        assert f'<li data-field="{field}"><code>{field}</code>: ' in page
    assert "The pipeline was not submitted: 2 fields need a change." in page


def test_a_pipeline_over_max_queued_tasks_is_refused_on_the_form(as_alice: Client, alice: User, datasets: Path) -> None:
    UserLimits.objects.create(user=alice, max_queued_tasks=2)
    response = as_alice.post("/tasks/new/", {"spec": DOCUMENT})
    page = text_of(response)
    assert response.status_code == 429
    assert "The pipeline was not submitted:</strong> " in page and "max_queued_tasks is 2" in page
    assert escape(DOCUMENT) + "</textarea>" in page
    assert not Pipeline.objects.exists()


def test_a_task_spec_still_goes_as_a_task(as_alice: Client, datasets: Path) -> None:
    spec = render_to_string("tasks/specs/ppo.yaml")
    assert not is_pipeline_document(spec)
    response = as_alice.post("/tasks/new/", {"spec": spec})
    assert response.status_code == 302 and not Pipeline.objects.exists()


def test_a_pipeline_can_be_copied_to_a_new_one(as_alice: Client, client: Client, bob: User, pipeline: Pipeline) -> None:
    page = text_of(as_alice.get(f"/tasks/new/?from_pipeline={pipeline.pipeline_id}"))
    assert escape(pipeline.document) + "</textarea>" in page
    client.force_login(bob)
    theirs = text_of(client.get(f"/tasks/new/?from_pipeline={pipeline.pipeline_id}"))
    assert escape(pipeline.document) + "</textarea>" not in theirs


# --- the task page links its pipeline -------------------------------------------------------


def test_a_steps_task_page_links_its_pipeline_and_what_it_runs_after(as_alice: Client, pipeline: Pipeline) -> None:
    steps = steps_of(pipeline)
    page = text_of(as_alice.get(f"/tasks/{steps['sft-export'].task_id}/"))
    link = f'<a id="pipeline-link" href="/pipelines/{pipeline.pipeline_id}/">{pipeline.pipeline_id}</a>'
    assert f"of pipeline {link}" in page
    assert "<strong data-step>sft-export</strong>" in page
    assert f'runs after <a class="task-id" href="/tasks/{steps["sft"].task_id}/">' in page
    assert "Held for its dependencies" in page and "Cancel task" in page
    plain = text_of(as_alice.get(f"/tasks/{steps['sft'].task_id}/"))
    assert "runs after" not in plain and 'id="pipeline-link"' in plain


def test_a_plain_tasks_page_names_its_after_any(as_alice: Client, alice: User, make_task) -> None:
    first = make_task(alice)
    second = submit_spec(alice, PPO_SPEC + f"after_any: [{first.task_id}]\n", actor="api:alice")
    page = text_of(as_alice.get(f"/tasks/{second.task_id}/"))
    link = f'<a class="task-id" href="/tasks/{first.task_id}/">{first.task_id}</a>'
    assert f'runs after {link} <small class="muted">(however it ends)</small>' in page
    assert 'id="pipeline-link"' not in page


# --- the graph's layout ---------------------------------------------------------------------


class Step:
    def __init__(self, name: str, after: list[str] = [], after_any: list[str] = []) -> None:  # noqa: B006
        self.name, self.after, self.after_any = name, after, after_any

    @property
    def depends_on(self) -> tuple[str, ...]:
        return (*self.after, *self.after_any)


def test_a_chain_is_one_row_of_columns() -> None:
    drawing = layout([Step("a"), Step("b", ["a"]), Step("c", ["b"])])
    assert [(box.step.name, box.column, box.row) for box in drawing.boxes] == [("a", 0, 0), ("b", 1, 0), ("c", 2, 0)]
    assert drawing.width == PAD * 2 + 3 * BOX_W + 2 * GAP_X and drawing.height == PAD * 2 + BOX_H
    assert [(e.source, e.target, e.any_end) for e in drawing.edges] == [("a", "b", False), ("b", "c", False)]
    a = drawing.boxes[0]
    assert drawing.edges[0].path.startswith(f"M {a.x + BOX_W} {a.y + BOX_H // 2} ")


def test_two_branches_join_with_the_join_centred() -> None:
    drawing = layout([Step("prep"), Step("left", ["prep"]), Step("right", ["prep"]), Step("eval", ["left"], ["right"])])
    boxes = {box.step.name: box for box in drawing.boxes}
    assert (boxes["left"].column, boxes["right"].column, boxes["eval"].column) == (1, 1, 2)
    assert (boxes["left"].row, boxes["right"].row) == (0, 1)
    # The lone steps sit between the two branches.
    assert boxes["prep"].y == boxes["eval"].y == (boxes["left"].y + boxes["right"].y) // 2
    assert [(e.source, e.target, e.any_end) for e in drawing.edges if e.target == "eval"] == [
        ("left", "eval", False),
        ("right", "eval", True),
    ]


def test_a_step_deep_in_the_graph_goes_in_the_column_after_its_deepest_dependency() -> None:
    drawing = layout([Step("a"), Step("b", ["a"]), Step("c", ["a", "b"]), Step("d", [])])
    assert {box.step.name: box.column for box in drawing.boxes} == {"a": 0, "b": 1, "c": 2, "d": 0}
