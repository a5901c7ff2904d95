"""The task pages in a real browser: submit from a template, a refused spec, a task's page with
its log and curves, cancel, the queue and the cluster, with and without Ray.

The ``page`` fixture fails a test whose page sent a request anywhere but the live server, or
logged a console error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from tasks.api.cluster import ERROR_FOR_USERS
from tasks.choices import EventKind, FailureKind, Role, TaskState
from tasks.models import Task
from tasks.pause import AdmissionControl
from tests.web.helpers import PageWatch, shot, sign_in
from tests.web.task_data import ray_down, ray_up, resumed_task, run_attempt, running_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NO_RAY = "Ray is not reachable: tasks wait until it is back"


def test_it_submits_the_ppo_template(signed_in_page: Page, datasets: Path) -> None:
    page = signed_in_page
    page.get_by_role("link", name="New task").first.click()
    expect(page).to_have_url(re.compile(r"/tasks/new/$"))
    page.get_by_role("button", name="PPO", exact=True).click()
    spec = page.get_by_label("Spec (YAML)")
    expect(spec).to_have_value(re.compile(r"^# PPO on GSM8K"))
    expect(spec).to_have_value(re.compile(r"train_file: \$HOME/common/datasets/gsm8k/train.parquet"))
    shot(page, "task-new-ppo")
    page.get_by_role("button", name="Submit task").click()

    task = Task.objects.get(user__username="alice")
    expect(page).to_have_url(re.compile(rf"/tasks/{task.task_id}/$"))
    expect(page.locator(".message-success")).to_contain_text(f"Task {task.task_id} is queued")
    expect(page.locator("#task-status")).to_contain_text("Queued")
    assert task.workload == "ppo" and task.events.get().actor == "web:alice"
    shot(page, "task-queued")


def test_a_task_can_be_submitted_with_the_keyboard_alone(signed_in_page: Page, datasets: Path) -> None:
    page = signed_in_page
    page.goto("/tasks/new/")
    expect(page.get_by_label("Spec (YAML)")).to_be_focused()  # ready to type or paste
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="GRPO: learning rate × batch size")).to_be_focused()  # the sweep's
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="SFT → export → GRPO → export")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Advanced", exact=True)).to_be_focused()
    for _ in range(2):
        page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="GRPO", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_label("Spec (YAML)")).to_be_focused()
    expect(page.get_by_label("Spec (YAML)")).to_have_value(re.compile(r"workload: grpo"))
    page.keyboard.press("Control+Enter")
    expect(page.locator(".message-success")).to_contain_text("is queued")
    assert Task.objects.get().workload == "grpo"


def test_a_template_replaces_the_text_and_undo_brings_it_back(signed_in_page: Page) -> None:
    page = signed_in_page
    page.goto("/tasks/new/")
    spec = page.get_by_label("Spec (YAML)")
    spec.fill("workload: sft\n")
    page.get_by_role("button", name="Advanced", exact=True).click()
    expect(spec).to_have_value(re.compile(r"kind: advanced"))
    page.get_by_role("button", name="Undo").click()
    expect(spec).to_have_value("workload: sft\n")


def test_an_invalid_spec_comes_back_with_its_text_and_the_fields_named(
    signed_in_page: Page, page_watch: PageWatch
) -> None:
    page = signed_in_page
    # The refused form comes back as a 400, which Chromium logs as a console error.
    page_watch.allow_console_error(r"status of 400 \(Bad Request\)")
    page.goto("/tasks/new/")
    text = "workload: dance\nnnodes: 0\nn_gpus_per_node: 4\ncolour: blue\n"
    page.get_by_label("Spec (YAML)").fill(text)
    # Ctrl+Enter submits from the text area.
    page.get_by_label("Spec (YAML)").press("Control+Enter")
    errors = page.get_by_role("alert")
    expect(errors).to_contain_text("The task was not queued")
    for field in ("workload", "nnodes", "colour", "model_id"):
        expect(errors.locator(f"li[data-field='{field}']")).to_be_visible()
    expect(page.get_by_label("Spec (YAML)")).to_have_value(text)
    expect(page.get_by_label("Spec (YAML)")).to_have_attribute("aria-invalid", "true")
    assert not Task.objects.exists()
    shot(page, "task-new-invalid")


def test_the_task_page_shows_the_log_the_curves_and_the_progress(
    signed_in_page: Page, alice: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    task = running_task(make_task, alice)
    page.goto(f"/tasks/{task.task_id}/")
    expect(page.locator("#task-status")).to_contain_text("Running")
    expect(page.locator("#log-text")).to_contain_text("step:3 - critic/score/mean:0.31")
    expect(page.locator("#log-text")).not_to_contain_text("\x1b")
    expect(page.locator("[data-step-text]")).to_have_text("Step 3 of 10")
    expect(page.locator("#step-progress")).to_have_attribute("max", "10")
    expect(page.locator("#step-progress")).to_have_js_property("value", 3)
    charts = page.locator("[data-charts] figure")
    expect(charts).to_have_count(3)
    expect(charts.first).to_have_attribute("data-metric", "critic/score/mean")  # scores first
    expect(charts.first.locator("canvas")).to_be_visible()
    expect(page.locator("#task-timeline")).to_contain_text("Ray reports the job RUNNING")
    expect(page.locator("#task-status tr[data-attempt='1']")).to_contain_text(f"{task.task_id}--a01")
    shot(page, "task-running")

    # The filter narrows the curves.
    page.get_by_label("Filter curves").fill("loss")
    expect(page.locator("[data-charts] figure:visible")).to_have_count(1)

    # The log grows and the page follows it, without a reload.
    log = Path(task.attempts.get().log_path)
    log.write_text(log.read_text() + "(TaskRunner pid=3165) step:4 - critic/score/mean:0.42\n")
    expect(page.locator("#log-text")).to_contain_text("step:4", timeout=8000)
    expect(page.locator("[data-step-text]")).to_have_text("Step 4 of 10", timeout=8000)

    # The task ends: the status follows within seconds.
    task.transition(
        TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler", message="Ray reports the job SUCCEEDED."
    )
    expect(page.locator("#task-status")).to_contain_text("Succeeded", timeout=8000)
    expect(page.locator("#task-status")).to_have_attribute("data-terminal", "true")
    expect(page.get_by_role("button", name="Cancel task")).to_have_count(0)
    expect(page.locator("#task-timeline")).to_contain_text("Ray reports the job SUCCEEDED")


def test_many_curves_show_the_first_few_until_asked(
    signed_in_page: Page, alice: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    task = make_task(alice, state=TaskState.SUCCEEDED, finished_at=timezone.now())
    keys = [f"perf/metric_{i:02d}" for i in range(10)] + ["critic/rewards/mean", "actor/entropy_loss"]
    lines = [f"step:{step} - " + " - ".join(f"{key}:{step * 0.1}" for key in keys) for step in (1, 2)]
    run_attempt(task, log="\n".join(lines) + "\n", ray_status="SUCCEEDED", end_time=timezone.now())
    page.goto(f"/tasks/{task.task_id}/")
    figures = page.locator("[data-charts] figure")
    expect(figures).to_have_count(12)
    expect(page.locator("[data-charts] figure:visible")).to_have_count(6)
    expect(figures.nth(0)).to_have_attribute("data-metric", "critic/rewards/mean")
    expect(figures.nth(1)).to_have_attribute("data-metric", "actor/entropy_loss")
    expect(page.locator("[data-chart-count]")).to_have_text("6 of 12 curves")
    page.get_by_role("button", name="Show all curves").click()
    expect(page.locator("[data-charts] figure:visible")).to_have_count(12)
    # Shown later, they are as wide as the first ones.
    widths = {box["width"] for box in (f.locator("canvas").bounding_box() for f in figures.all()) if box}
    assert len(widths) == 1
    shot(page, "task-many-curves")


def test_a_poll_that_changes_nothing_leaves_the_page_alone(
    signed_in_page: Page, alice: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    task = make_task(
        alice,
        state=TaskState.PENDING_RESOURCES,
        pending_reason="needs 1 node with 4 free GPUs",
        next_run_at=timezone.now() + timedelta(seconds=50),
    )
    run_attempt(
        task,
        ray_status="FAILED",
        failure_kind=FailureKind.INSUFFICIENT_RESOURCES,
        message="Total available GPUs 0 is less than total desired GPUs 4",
        end_time=timezone.now(),
    )
    page.goto(f"/tasks/{task.task_id}/")
    message = page.locator("tr[data-attempt='1'] details")
    message.locator("summary").click()
    expect(message).to_have_attribute("open", "")
    for _ in range(2):  # two polls of the status come and go
        with page.expect_response(lambda r: r.url.endswith(f"/tasks/{task.task_id}/") and r.request.method == "GET"):
            pass
    expect(message).to_have_attribute("open", "")

    # A real change is swapped in, and the page goes on polling.
    task.transition(TaskState.QUEUED, role=Role.SCHEDULER, actor="scheduler", message="Retrying now.")
    expect(page.locator("#task-status")).to_contain_text("Queued", timeout=8000)
    expect(page.locator("#task-timeline")).to_contain_text("Retrying now.")


def test_a_failed_task_says_why_with_its_attempts(
    signed_in_page: Page, alice: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    task = make_task(alice, state=TaskState.FAILED, finished_at=timezone.now(), error_summary="ValueError: bad reward")
    run_attempt(
        task,
        ray_status="FAILED",
        failure_kind=FailureKind.INSUFFICIENT_RESOURCES,
        message="Total available GPUs 0 is less than total desired GPUs 4",
        end_time=timezone.now() - timedelta(minutes=3),
        exit_code=1,
    )
    run_attempt(
        task,
        ray_status="FAILED",
        failure_kind=FailureKind.RUNTIME_ERROR,
        message="Traceback (most recent call last):\n  ...\nValueError: bad reward",
        end_time=timezone.now(),
        exit_code=1,
        log="first line\nValueError: bad reward\n",
    )
    task.record(EventKind.RETRY_SCHEDULED, actor="scheduler", message="Retrying: the cluster was full.")
    page.goto(f"/tasks/{task.task_id}/")
    expect(page.locator(".error-summary")).to_contain_text("ValueError: bad reward")
    expect(page.locator("#log-text")).to_contain_text("ValueError: bad reward")
    expect(page.locator("[data-log-state]")).to_contain_text("end of its log")
    # Several attempts: a selector, and the first attempt's log on demand.
    page.get_by_label("Attempt", exact=True).select_option("1")
    expect(page.locator("#log-text")).to_contain_text("step:3")
    row = page.locator("tr[data-attempt='2']")
    expect(row).to_contain_text("Runtime error")
    row.locator("summary").click()
    expect(row.locator("details pre")).to_contain_text("Traceback")
    shot(page, "task-failed")


def test_it_cancels_a_queued_task_after_confirming(
    signed_in_page: Page, alice: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    task = make_task(alice)
    page.goto(f"/tasks/{task.task_id}/")
    page.get_by_role("button", name="Cancel task").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_contain_text("It has not started: it leaves the queue at once.")
    shot(page, "task-cancel-confirm")
    # Dismissed first: nothing happens.
    dialog.get_by_role("button", name="Cancel", exact=True).click()
    expect(dialog).not_to_be_visible()
    task.refresh_from_db()
    assert task.state == TaskState.QUEUED

    page.get_by_role("button", name="Cancel task").click()
    dialog.get_by_role("button", name="Yes, cancel it").click()
    expect(page.locator(".message-success")).to_contain_text(f"Task {task.task_id} is canceled")
    expect(page.locator("#task-status")).to_contain_text("Canceled")
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    shot(page, "task-canceled")


def test_another_users_task_is_a_404_page(
    page: Page, page_watch: PageWatch, alice: User, bob: User, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    # Chromium logs the 404 of the document itself as a console error.
    page_watch.allow_console_error(r"404 \(Not Found\)")
    sign_in(page, "bob")
    response = page.goto(f"/tasks/{task.task_id}/")
    assert response is not None and response.status == 404
    expect(page.locator("h1")).to_have_text("Not found")
    assert task.task_id not in page.content()


def test_the_list_updates_states_live_and_filters(
    signed_in_page: Page, alice: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    waiting = make_task(alice, state=TaskState.PENDING_RESOURCES, pending_reason="needs 1 node with 4 free GPUs")
    failed = make_task(alice, state=TaskState.FAILED, error_summary="CUDA out of memory")
    page.goto("/tasks/")
    row = page.locator(f"tr[data-task='{waiting.task_id}']")
    expect(row).to_contain_text("Pending resources")
    expect(row).to_contain_text("needs 1 node with 4 free GPUs")
    expect(page.locator(f"tr[data-task='{failed.task_id}']")).to_contain_text("CUDA out of memory")
    shot(page, "tasks-list")

    Task.objects.filter(pk=waiting.pk).update(state=TaskState.RUNNING)
    expect(row).to_contain_text("Running", timeout=8000)

    page.get_by_role("link", name=re.compile("Failed")).click()
    expect(page).to_have_url(re.compile(r"\?state=FAILED$"))
    expect(page.locator("tr[data-task]")).to_have_count(1)
    page.get_by_role("link", name=failed.task_id).click()
    expect(page).to_have_url(re.compile(rf"/tasks/{failed.task_id}/$"))


def test_an_admin_sees_everyones_tasks(page: Page, admin: User, alice: User, bob: User, make_task) -> None:
    make_task(alice)
    make_task(bob)
    sign_in(page, "admin")
    expect(page.get_by_role("columnheader", name="User")).to_be_visible()
    expect(page.locator("tr[data-task]")).to_have_count(2)
    shot(page, "tasks-admin")


def test_the_queue_masks_other_users_tasks(
    signed_in_page: Page, alice: User, bob: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    ray_up()
    running_task(make_task, bob)
    theirs = make_task(bob, state=TaskState.PENDING_RESOURCES, pending_reason="needs 1 node with 4 free GPUs")
    mine = make_task(alice, pending_reason="behind 1 task (strict FIFO)")
    page.goto("/queue/")
    expect(page.locator(f"tr[data-task='{mine.task_id}']")).to_contain_text("behind 1 task")
    expect(page.locator(f"tr[data-task='{mine.task_id}'] td").first).to_have_text("2")
    expect(page.locator("tr.masked")).to_have_count(2)
    assert theirs.task_id not in page.content()
    expect(page.locator("[data-ray-notice]")).to_have_count(0)
    shot(page, "queue")


def test_the_cluster_page_with_ray(signed_in_page: Page) -> None:
    page = signed_in_page
    ray_up()
    page.goto("/cluster/")
    expect(page.locator(".stat-card").first).to_contain_text("5 of 8")
    expect(page.locator("tr[data-node]")).to_have_count(3)
    expect(page.get_by_text("Fresh", exact=True)).to_be_visible()
    expect(page.locator("[data-ray-notice]")).to_have_count(0)
    shot(page, "cluster")


def test_the_cluster_page_when_ray_is_down(signed_in_page: Page) -> None:
    page = signed_in_page
    ray_down()
    page.goto("/cluster/")
    expect(page.locator("[data-ray-notice]")).to_contain_text(NO_RAY)
    # Ray's errors name its dashboard, shown to admins only (test_task_pages.py shows them theirs).
    expect(page.locator("[data-ray-notice]")).to_contain_text(ERROR_FOR_USERS)
    expect(page.locator("[data-ray-notice]")).not_to_contain_text("refused")
    shot(page, "cluster-ray-down")


@pytest.mark.parametrize("url", ["/tasks/", "/tasks/new/", "/queue/", "/cluster/"])
def test_every_task_page_says_when_there_is_no_ray_at_all(signed_in_page: Page, url: str) -> None:
    page = signed_in_page
    response = page.goto(url)
    assert response is not None and response.status == 200
    expect(page.locator("[data-ray-notice]")).to_contain_text(NO_RAY)
    shot(page, "no-ray-" + url.strip("/").replace("/", "-"))


def test_the_task_list_shows_the_admission_pause(
    signed_in_page: Page, alice: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    task = make_task(alice)
    AdmissionControl.set(True, "GPU driver upgrade", "api:admin")
    page.goto("/tasks/")
    banner = page.locator("[data-admission-banner]")
    expect(banner).to_be_visible()
    expect(banner).to_have_text(
        re.compile(r"^\s*Admission is paused: GPU driver upgrade\s+— running tasks go on; nothing new starts.\s*$")
    )
    expect(page.locator(f"tr[data-task='{task.task_id}']")).to_be_visible()
    shot(page, "admission-paused")
    AdmissionControl.set(False, "", "api:admin")
    page.reload()
    expect(banner).to_have_count(0)


def test_the_task_page_without_ray(signed_in_page: Page, alice: User, make_task: Callable[..., Task]) -> None:
    page = signed_in_page
    task = make_task(alice)
    page.goto(f"/tasks/{task.task_id}/")
    expect(page.locator("[data-ray-notice]")).to_contain_text(NO_RAY)
    expect(page.locator("#log-text")).to_contain_text("No attempt yet")
    shot(page, "no-ray-task")


# Counts, on a chart's canvas, the pixels of each column in the seam colour (task.js's
# SEAM_COLOUR, #b45309): a dashed line is one column with many of them.
SEAM_COLUMNS = """canvas => {
  const { width, height } = canvas;
  const data = canvas.getContext("2d").getImageData(0, 0, width, height).data;
  const columns = new Array(width).fill(0);
  for (let i = 0; i < data.length; i += 4) {
    const [r, g, b] = [data[i], data[i + 1], data[i + 2]];
    if (Math.abs(r - 180) < 30 && Math.abs(g - 83) < 30 && b < 50) columns[(i / 4) % width] += 1;
  }
  return { height, tallest: Math.max(...columns) };
}"""


def test_the_curves_run_across_attempts_with_the_seam_marked(
    signed_in_page: Page, alice: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    # Attempt 2 resumed from step 3 and has run 47½ minutes of its 2 hours.
    task = resumed_task(make_task, alice, started_ago=timedelta(minutes=47, seconds=30), time_limit_s=2 * 3600)
    page.goto(f"/tasks/{task.task_id}/")
    status = page.locator("#task-status")
    expect(status.locator(".status-text")).to_contain_text("attempt 2, resumed from step 3")
    expect(status.locator("[data-time-left]")).to_have_text("Time limit 2 h; 1 h 12 min left.")
    expect(page.locator(".facts")).to_contain_text("time limit 2 h")
    expect(status.locator("tr[data-attempt='1']")).to_contain_text("started from scratch")
    expect(status.locator("tr[data-attempt='2']")).to_contain_text("resumed from step 3")

    # The curves: steps 1-7, one point each (4 and 5 from attempt 2), with the seam.
    expect(page.locator("[data-step-text]")).to_have_text("Step 7 of 10")
    seams = page.locator("[data-seams]")
    expect(seams).to_be_visible()
    expect(seams).to_contain_text("across 2 attempts")
    expect(seams).to_contain_text("attempt 2 resumed from step 3")
    score = page.locator("[data-charts] figure[data-metric='critic/score/mean']")
    expect(score).to_have_attribute("aria-label", re.compile(r"^critic/score/mean: 7 points, .*attempt 2 from step 4$"))
    drawn = score.locator("canvas").evaluate(SEAM_COLUMNS)
    assert drawn["tallest"] > drawn["height"] / 3, drawn  # a line across the plot, not a stray pixel
    shot(page, "task-resumed")

    # The log picker shows one attempt's log; the curves stay the whole task's.
    page.get_by_label("Attempt", exact=True).select_option("1")
    expect(page.locator("#log-text")).to_contain_text("Training from scratch")
    expect(score).to_have_attribute("aria-label", re.compile("7 points"))
    expect(page.locator("[data-metrics-link]")).to_have_attribute("href", re.compile(r"/metrics$"))
