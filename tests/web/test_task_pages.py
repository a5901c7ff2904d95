"""The task pages through Django's test client: permissions, the new-task form, cancel, filters,
and every page with and without Ray data."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from accounts.homes import home_dir
from accounts.models import UserLimits
from common.durations import format_seconds
from raypool.raytoken import ensure_token, token_file_from_settings
from tasks.api.cluster import ERROR_FOR_USERS
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.models import ClusterState, Task, Usage
from tasks.queue.notes import about
from tasks.specs.parse import parse_spec
from tasks.web.views import SPEC_TEMPLATES, TASKS_PER_PAGE
from tests.conftest import grant_high_priority
from tests.web.task_data import ray_down, ray_up, resumed_task, run_attempt, running_task

pytestmark = pytest.mark.django_db

NO_RAY = "Ray is not reachable: tasks wait until it is back"
PAGES = ["/tasks/", "/tasks/new/", "/queue/", "/cluster/"]
MakeTask = Callable[..., Task]


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


def text_of(response) -> str:
    return response.content.decode()


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


# --- who may see what ----------------------------------------------------------------------


@pytest.mark.parametrize("url", [*PAGES, "/tasks/{task_id}/"])
def test_signed_out_visitors_are_sent_to_sign_in(client: Client, alice: User, make_task: MakeTask, url: str) -> None:
    url = url.format(task_id=make_task(alice).task_id)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={url}"


def test_signed_out_visitors_cannot_cancel(client: Client, alice: User, make_task: MakeTask) -> None:
    task = make_task(alice)
    response = client.post(f"/tasks/{task.task_id}/cancel/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    task.refresh_from_db()
    assert task.state == TaskState.QUEUED


def test_another_users_task_is_a_404_page(client: Client, alice: User, bob: User, make_task: MakeTask) -> None:
    task = make_task(alice)
    client.force_login(bob)
    response = client.get(f"/tasks/{task.task_id}/")
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in text_of(response) and task.task_id not in text_of(response)


def test_another_users_task_cannot_be_canceled(client: Client, alice: User, bob: User, make_task: MakeTask) -> None:
    task = make_task(alice)
    client.force_login(bob)
    assert client.post(f"/tasks/{task.task_id}/cancel/").status_code == 404
    task.refresh_from_db()
    assert task.state == TaskState.QUEUED


def test_a_user_lists_only_their_own_tasks(as_alice: Client, alice: User, bob: User, make_task: MakeTask) -> None:
    mine = make_task(alice)
    theirs = make_task(bob)
    page = text_of(as_alice.get("/tasks/"))
    assert mine.task_id in page and theirs.task_id not in page
    assert '<th scope="col">User</th>' not in page


def test_an_admin_sees_everyones_tasks_with_a_user_column(
    client: Client, admin: User, alice: User, bob: User, make_task: MakeTask
) -> None:
    tasks = [make_task(alice), make_task(bob)]
    client.force_login(admin)
    page = text_of(client.get("/tasks/"))
    assert '<th scope="col">User</th>' in page
    assert all(task.task_id in page for task in tasks)
    detail = client.get(f"/tasks/{tasks[0].task_id}/")
    assert detail.status_code == 200 and "by alice" in text_of(detail)


# --- the list ------------------------------------------------------------------------------


def test_the_list_is_newest_first_with_times_and_reasons(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    older = make_task(
        alice,
        state=TaskState.PENDING_RESOURCES,
        pending_reason="needs 1 node with 4 free GPUs; 0 nodes have them now",
        created_at=timezone.now() - timedelta(minutes=3),
    )
    failed = make_task(alice, state=TaskState.FAILED, error_summary="CUDA out of memory", finished_at=timezone.now())
    page = text_of(as_alice.get("/tasks/"))
    assert page.index(failed.task_id) < page.index(older.task_id)
    assert "3\xa0minutes ago" in page
    assert f'title="{older.created_at:%Y-%m-%d %H:%M:%S} UTC"' in page
    assert "needs 1 node with 4 free GPUs; 0 nodes have them now" in page
    assert "CUDA out of memory" in page
    assert '<span class="state state-pending_resources">Pending resources</span>' in page
    assert f'href="/tasks/{older.task_id}/"' in page


def test_the_list_filters_by_state(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    queued = make_task(alice)
    failed = make_task(alice, state=TaskState.FAILED)
    page = text_of(as_alice.get("/tasks/?state=FAILED"))
    assert failed.task_id in page and queued.task_id not in page
    assert 'id="filter-failed" href="?state=FAILED" aria-current="true"' in page
    # Several states at once, as the API takes them.
    page = text_of(as_alice.get("/tasks/?state=FAILED&state=QUEUED"))
    assert failed.task_id in page and queued.task_id in page


def test_a_filter_with_no_match_says_so(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    make_task(alice)
    page = text_of(as_alice.get("/tasks/?state=SUCCEEDED"))
    assert "No succeeded tasks." in page


def test_an_unknown_state_filter_shows_everything(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    task = make_task(alice)
    response = as_alice.get("/tasks/?state=SLEEPING")
    assert response.status_code == 200 and task.task_id in text_of(response)


def test_the_list_pages_and_keeps_the_filter(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    for _ in range(TASKS_PER_PAGE + 2):
        make_task(alice, state=TaskState.FAILED)
    make_task(alice)
    first = text_of(as_alice.get("/tasks/?state=FAILED"))
    assert first.count("<tr data-task=") == TASKS_PER_PAGE
    assert 'href="?state=FAILED&amp;page=2"' in first
    second = text_of(as_alice.get("/tasks/?state=FAILED&page=2"))
    assert second.count("<tr data-task=") == 2


def test_the_list_polls_for_its_live_part(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    task = make_task(alice)
    page = text_of(as_alice.get("/tasks/?state=QUEUED"))
    assert 'hx-get="/tasks/?state=QUEUED" hx-trigger="every 4s"' in page
    part = as_alice.get("/tasks/?state=QUEUED", HTTP_HX_REQUEST="true")
    assert part.status_code == 200
    assert text_of(part).lstrip().startswith('<div id="task-list"') and task.task_id in text_of(part)
    assert "<html" not in text_of(part)
    assert "HX-Request" in part["Vary"]
    assert "no-store" in part["Cache-Control"]


def test_the_list_costs_the_same_queries_for_many_tasks(
    as_alice: Client, alice: User, make_task: MakeTask, django_assert_max_num_queries
) -> None:
    for state in (TaskState.QUEUED, TaskState.RUNNING, TaskState.FAILED) * 5:
        make_task(alice, state=state)
    # session + user, the cluster state, counts by state, the page's count and rows
    with django_assert_max_num_queries(6):
        as_alice.get("/tasks/", HTTP_HX_REQUEST="true")


# --- the new-task form ---------------------------------------------------------------------


def test_the_form_has_a_spec_textarea_and_the_four_templates(as_alice: Client) -> None:
    page = text_of(as_alice.get("/tasks/new/"))
    assert '<label for="id_spec">' in page and 'name="spec" id="id_spec"' in page
    for key, label in SPEC_TEMPLATES:
        assert f'data-template="{key}"' in page and f">{label}</button>" in page
        assert f'<script type="text/yaml" id="spec-template-{key}"' in page
    assert "train_file: $HOME/common/datasets/gsm8k/train.parquet" in page


def test_the_form_shows_where_the_macros_point(as_alice: Client, shared_root: Path) -> None:
    page = text_of(as_alice.get("/tasks/new/"))
    assert str(shared_root / "datasets") in page and str(shared_root / "hf") in page
    assert str(home_dir("alice")) in page


@pytest.mark.parametrize(("key", "label"), SPEC_TEMPLATES)
def test_every_template_is_a_valid_spec(alice: User, datasets: Path, key: str, label: str) -> None:
    # The SFT template reads the user's own data: files they would upload on the Data page.
    sft = home_dir("alice") / "datasets" / "sft"
    sft.mkdir(parents=True)
    for name in ("train.parquet", "val.parquet"):
        (sft / name).write_bytes(b"PAR1")
    parsed = parse_spec(render_to_string(f"tasks/specs/{key}.yaml"), username="alice")
    assert parsed.warnings == []
    assert parsed.resolved.workload == ("grpo" if key == "advanced" else key)


def test_a_valid_spec_is_queued_and_opens_its_page(as_alice: Client, datasets: Path) -> None:
    spec = render_to_string("tasks/specs/ppo.yaml")
    response = as_alice.post("/tasks/new/", {"spec": spec})
    task = Task.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/tasks/{task.task_id}/"
    assert task.spec_raw == spec and task.state == TaskState.QUEUED
    assert task.events.get().actor == "web:alice"
    page = as_alice.get(response["Location"])
    assert f"Task {task.task_id} is queued." in messages_of(page)


def test_a_control_character_in_the_form_is_a_400_naming_it(as_alice: Client) -> None:
    response = as_alice.post("/tasks/new/", {"spec": "workload: ppo\x1b[31m\nnnodes: 1\n"})
    assert response.status_code == 400
    assert "character #x001b is not allowed" in text_of(response)
    assert not Task.objects.exists()


def test_browser_line_breaks_do_not_break_an_advanced_command(as_alice: Client, datasets: Path) -> None:
    # Browsers send a textarea's lines as CRLF; a \r in a command would be refused.
    spec = render_to_string("tasks/specs/advanced.yaml").replace("\n", "\r\n")
    response = as_alice.post("/tasks/new/", {"spec": spec})
    assert response.status_code == 302, text_of(response)
    assert "\r" not in Task.objects.get().spec["command"]


def test_the_specs_warnings_come_with_the_success_message(as_alice: Client) -> None:
    spec = "kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: 1\ncommand: python3 -m verl.trainer.main_ppo\n"
    response = as_alice.post("/tasks/new/", {"spec": spec}, follow=True)
    shown = messages_of(response)
    assert any("is queued" in m for m in shown)
    assert any("+ray_kwargs.ray_init.address=auto" in m for m in shown)
    assert "warning about the spec" in text_of(response) or "warnings about the spec" in text_of(response)


def test_an_invalid_spec_comes_back_with_its_text_and_each_field_named(as_alice: Client) -> None:
    spec = "workload: dance\nnnodes: 0\nn_gpus_per_node: 4\ncolour: <blue>\n"
    response = as_alice.post("/tasks/new/", {"spec": spec})
    page = text_of(response)
    assert response.status_code == 400
    assert "workload: dance\nnnodes: 0\nn_gpus_per_node: 4\ncolour: &lt;blue&gt;\n</textarea>" in page
    for field in ("workload", "nnodes", "colour", "model_id", "train_file", "val_file"):
        assert f'<li data-field="{field}"><code>{field}</code>: ' in page
    assert "must be between 1 and 1024, not 0" in page
    assert 'aria-invalid="true"' in page
    assert not Task.objects.exists()


def test_broken_yaml_is_an_error_about_the_whole_spec(as_alice: Client) -> None:
    response = as_alice.post("/tasks/new/", {"spec": "workload: [ppo\n"})
    assert response.status_code == 400
    assert '<li data-field="spec">The spec: invalid YAML' in text_of(response)


def test_a_spec_over_64_kib_is_refused(as_alice: Client) -> None:
    spec = "workload: ppo\n" + "# padding\n" * 7000
    response = as_alice.post("/tasks/new/", {"spec": spec})
    assert response.status_code == 413
    assert "larger than 65536 bytes" in text_of(response)
    assert not Task.objects.exists()


def test_a_user_at_max_queued_tasks_gets_the_refusal_on_the_form(
    as_alice: Client, alice: User, make_task: MakeTask
) -> None:
    UserLimits.objects.create(user=alice, max_queued_tasks=1)
    make_task(alice)
    spec = render_to_string("tasks/specs/ppo.yaml")
    response = as_alice.post("/tasks/new/", {"spec": spec})
    page = text_of(response)
    assert response.status_code == 429
    assert "The task was not queued:</strong> alice has 1 task waiting; max_queued_tasks is 1." in page
    assert escape(spec) + "</textarea>" in page  # kept, to send once a task has started
    assert Task.objects.count() == 1


def test_priority_high_without_the_grant_is_refused_on_the_form(as_alice: Client, alice: User, datasets: Path) -> None:
    spec = render_to_string("tasks/specs/ppo.yaml").replace("priority: normal", "priority: high")
    response = as_alice.post("/tasks/new/", {"spec": spec})
    page = text_of(response)
    assert response.status_code == 403
    assert (
        "The task was not queued:</strong> priority: high is not allowed for alice; an administrator can grant it "
        "(can_use_high_priority, in the admin site or PATCH /api/v2/users/alice)"
    ) in page
    assert escape(spec) + "</textarea>" in page  # kept, to send at normal priority
    assert not Task.objects.exists()
    grant_high_priority(alice)
    assert as_alice.post("/tasks/new/", {"spec": spec}).status_code == 302
    assert Task.objects.get().priority == "high"


def test_a_task_can_be_copied_to_a_new_one(as_alice: Client, alice: User, bob: User, make_task: MakeTask) -> None:
    mine = make_task(
        alice,
        spec="workload: sft\nnnodes: 1\nn_gpus_per_node: 2\nmodel_id: Qwen/Qwen2.5-0.5B-Instruct\n"
        "train_file: $HOME/common/datasets/gsm8k/train.parquet\nval_file: $HOME/common/datasets/gsm8k/test.parquet\n",
    )
    assert "workload: sft\nnnodes: 1\nn_gpus_per_node: 2" in text_of(as_alice.get(f"/tasks/new/?from={mine.task_id}"))
    theirs = make_task(bob)
    assert theirs.spec_raw not in text_of(as_alice.get(f"/tasks/new/?from={theirs.task_id}"))


# --- a task's page -------------------------------------------------------------------------


def test_the_task_page_shows_state_attempts_timeline_and_spec(
    as_alice: Client, alice: User, make_task: MakeTask
) -> None:
    task = running_task(make_task, alice)
    run_attempt(task, message="Traceback: boom", exit_code=1, failure_kind=FailureKind.RUNTIME_ERROR)
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    assert '<span class="state state-running">Running</span>' in page
    assert f'<code class="path">{task.task_id}--a01</code>' in page
    assert "Runtime error" in page and "<details><summary>Traceback: boom</summary>" in page
    assert "Ray reports the job RUNNING." in page and "scheduler · attempt 1" in page
    assert 'data-attempts="1,2"' in page
    # The spec as sent, and as run: macros expanded, the command one argument a line.
    assert "train_file: $HOME/common/datasets/gsm8k/train.parquet" in page
    assert "python3 -m verl.trainer.main_ppo \\\n    data.train_files=" in page
    assert "\\\n    &quot;trainer.logger=[&#x27;console&#x27;,&#x27;file&#x27;]&quot;</pre>" in page
    assert f"job_root: {home_dir('alice')}/jobs/{task.task_id}--a02" in page
    # Live while it runs: the status polls; the log and curves come from the API.
    assert f'hx-get="/tasks/{task.task_id}/" hx-trigger="every 3s"' in page
    assert 'id="log-text"' in page and 'id="step-progress"' in page
    assert f'action="/tasks/{task.task_id}/cancel/"' in page and "data-confirm=" in page


def test_a_failed_task_says_why_first(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    task = make_task(alice, state=TaskState.FAILED, error_summary="ValueError: bad reward", finished_at=timezone.now())
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    assert re.search(r"Why it failed</h2>\s*<pre>ValueError: bad reward</pre>", page)
    # Finished: no cancel, no polling.
    assert "/cancel/" not in page and "hx-trigger" not in page


def test_a_waiting_task_says_why_it_waits(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    task = make_task(
        alice,
        state=TaskState.PENDING_RESOURCES,
        pending_reason="needs 1 node with 4 free GPUs; 0 nodes have them now",
        next_run_at=timezone.now() + timedelta(seconds=40),
    )
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    assert "Waiting: needs 1 node with 4 free GPUs; 0 nodes have them now; next try in under a minute." in page
    assert "No attempt yet" in page


def test_a_waiting_task_says_when_it_should_start(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    start = timezone.now() + timedelta(hours=2)
    task = make_task(alice, pending_reason="waiting its turn", estimated_start_at=start, preemptible=True)
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    assert f"<span data-estimated-start>Expected to start {about(start, timezone.now())}.</span>" in page
    assert ">preemptible</span>" in page
    # Once it runs, the scheduler's last estimate is no longer one.
    Task.objects.filter(pk=task.pk).update(state=TaskState.RUNNING)
    assert "Expected to start" not in text_of(as_alice.get(f"/tasks/{task.task_id}/"))


def test_a_preempted_task_says_so_and_its_event_is_in_the_timeline(
    as_alice: Client, alice: User, bob: User, make_task: MakeTask
) -> None:
    task = running_task(make_task, alice, preemptible=True)
    attempt = task.attempts.get()
    attempt.preempted_at = timezone.now()
    attempt.save(update_fields=["preempted_at"])
    task.record(
        EventKind.PREEMPTED,
        actor="scheduler",
        attempt=attempt,
        message="Preempted to make room for a task of high priority: stops after its next checkpoint.",
        data={"for_task": "bob-ppo-20261123-101500-3f2a", "grace_s": 600},
    )
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    assert '<span class="time-left time-left-low" data-preempted>Preempted just now' in page
    assert '<li class="event" data-event="PREEMPTED">' in page
    assert '<span class="event-kind">Preempted</span>' in page
    assert "Preempted to make room for a task of high priority" in page and "scheduler · attempt 1" in page


def test_the_task_pages_live_part_is_the_status_and_the_timeline(
    as_alice: Client, alice: User, make_task: MakeTask, django_assert_max_num_queries
) -> None:
    task = running_task(make_task, alice)
    with django_assert_max_num_queries(6):
        response = as_alice.get(f"/tasks/{task.task_id}/", HTTP_HX_REQUEST="true")
    part = text_of(response)
    assert part.lstrip().startswith('<section id="task-status"')
    assert '<aside id="task-timeline"' in part and "<html" not in part
    assert "HX-Request" in response["Vary"]


def test_a_stop_requested_task_offers_no_second_cancel(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    task = running_task(make_task, alice, cancel_requested_at=timezone.now())
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    assert "Stop requested just now" in page and "/cancel/" not in page


# --- cancel --------------------------------------------------------------------------------


def test_cancel_of_a_queued_task_is_immediate(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    task = make_task(alice)
    response = as_alice.post(f"/tasks/{task.task_id}/cancel/", follow=True)
    assert response.redirect_chain == [(f"/tasks/{task.task_id}/", 302)]
    assert f"Task {task.task_id} is canceled." in messages_of(response)
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    assert task.events.get(to_state=TaskState.CANCELED).actor == "web:alice"


def test_cancel_of_a_running_task_asks_ray_to_stop_it(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    task = running_task(make_task, alice)
    response = as_alice.post(f"/tasks/{task.task_id}/cancel/", follow=True)
    assert any(m.startswith("Stop requested") for m in messages_of(response))
    task.refresh_from_db()
    assert task.state == TaskState.RUNNING and task.cancel_requested_at is not None
    assert task.events.filter(kind=EventKind.CANCEL_REQUESTED, actor="web:alice").count() == 1


@pytest.mark.parametrize("state", [TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELED])
def test_cancel_of_a_finished_task_says_so(as_alice: Client, alice: User, make_task: MakeTask, state: str) -> None:
    task = make_task(alice, state=state)
    response = as_alice.post(f"/tasks/{task.task_id}/cancel/", follow=True)
    assert response.status_code == 200
    assert f"Task {task.task_id} had already finished ({state.lower()}): nothing to cancel." in messages_of(response)
    task.refresh_from_db()
    assert task.state == state


def test_cancel_wants_a_post(as_alice: Client, alice: User, make_task: MakeTask) -> None:
    task = make_task(alice)
    assert as_alice.get(f"/tasks/{task.task_id}/cancel/").status_code == 405


# --- the queue -----------------------------------------------------------------------------


def test_the_queue_is_in_order_with_positions_and_reasons(
    as_alice: Client, alice: User, bob: User, make_task: MakeTask
) -> None:
    running_task(make_task, bob)
    first = make_task(alice, pending_reason="needs 1 node with 4 free GPUs")
    theirs = make_task(bob, pending_reason="behind 1 task")
    urgent = make_task(
        alice, spec=render_to_string("tasks/specs/ppo.yaml").replace("priority: normal", "priority: high")
    )
    page = text_of(as_alice.get("/queue/"))
    positions = re.findall(r'<tr data-position="(\d*)"', page)
    assert positions == ["", "1", "2", "3"]
    assert page.index(urgent.task_id) < page.index(first.task_id)
    assert "needs 1 node with 4 free GPUs" in page and "behind 1 task" in page
    # Bob's tasks keep their place, not their ids nor, in their rows, their owner (the notes and
    # the fair-share table below do name users: issue 11).
    queue_table = page[page.index('<table class="queue">') : page.index("</table>")]
    assert theirs.task_id not in page and "bob" not in queue_table
    assert page.count("another user's task") == 2
    assert "<strong>1</strong> on Ray" in page and "<strong>3</strong> waiting" in page


def test_the_queue_page_and_the_queue_api_agree(
    as_alice: Client, alice: User, bob: User, make_task: MakeTask, client_for
) -> None:
    running_task(make_task, alice)
    for user in (bob, alice, bob):
        make_task(user, pending_reason="behind the head of the queue")
    rows = client_for(alice).get("/api/v2/queue").json()["results"]
    page = text_of(as_alice.get("/queue/"))
    assert re.findall(r'<tr data-position="(\d*)"', page) == [str(row["position"] or "") for row in rows]
    shown = re.findall(r'<tr data-position="\d*"(?: data-task="([^"]+)")?', page)
    assert shown == [row["task_id"] or "" for row in rows]
    assert [row["task_id"] is None for row in rows] == [False, True, False, True]


def test_the_queue_page_is_in_fair_share_order_with_notes_and_the_share_table(
    settings, as_alice: Client, alice: User, bob: User, make_task: MakeTask
) -> None:
    settings.ARGUS_FAIR_SHARE_WINDOW_S = 2 * 3600
    Usage.objects.create(user=alice, gpu_seconds=50 * 3600, as_of=timezone.now())
    now = timezone.now()
    mine = make_task(alice, created_at=now - timedelta(minutes=30), preemptible=True)
    make_task(bob, created_at=now - timedelta(minutes=10), estimated_start_at=now + timedelta(hours=1))
    page = text_of(as_alice.get("/queue/"))
    # bob's later task first: alice is the heavy user.
    assert re.findall(r'<tr data-position="(\d*)"(?: data-task="([^"]+)")?', page) == [("1", ""), ("2", mine.task_id)]
    notes = re.findall(r"<span class=\"queue-note\" data-note>([^<]+)</span>", page)
    assert notes[0] == f"{about(now + timedelta(hours=1), timezone.now())}, first in line"
    assert escape("behind 1 task of bob's; 1 task of a lighter user (bob) goes first (fair share)") in notes[1]
    assert "preemptible</span>" in page
    table = page[page.index('<table class="shares">') :]
    users = re.findall(r'<tr data-user="([^"]+)"', table)
    assert users == ["bob", "alice"]
    assert '<tr data-user="alice" class="you">' in table and "(you)" in table
    assert '<td class="num">50.0</td>' in table and "submitted up to 2 h earlier" in page


def test_the_queue_page_says_when_fair_share_is_off(settings, as_alice: Client, alice: User, make_task) -> None:
    settings.ARGUS_FAIR_SHARE_WINDOW_S = 0
    make_task(alice)
    assert "Fair share is off" in text_of(as_alice.get("/queue/"))


def test_an_admin_sees_the_whole_queue(client: Client, admin: User, bob: User, make_task: MakeTask) -> None:
    task = make_task(bob)
    client.force_login(admin)
    page = text_of(client.get("/queue/"))
    assert task.task_id in page and "another user's task" not in page


def test_an_empty_queue_says_so(as_alice: Client) -> None:
    assert "The queue is empty" in text_of(as_alice.get("/queue/"))


# --- the cluster ---------------------------------------------------------------------------


def test_the_cluster_shows_nodes_gpus_and_the_head(as_alice: Client) -> None:
    ray_up()
    page = text_of(as_alice.get("/cluster/"))
    assert '<strong>5</strong> <span class="muted">of 8</span>' in page
    assert "on 2 live worker nodes" in page
    for ip in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert f'<code class="path">{ip}</code>' in page
    assert 'aria-label="1 of 4 GPUs free"><span class="fill-5">' in page  # 25 %, in steps of 5 %
    assert "20 / 32" in page
    # CPUs beside GPUs: the workers' 52 of 64 free, and what a task needs per GPU.
    assert 'aria-label="52 of 64 CPUs free"' in page
    assert "a task needs 3 per GPU on a node, as verl's bundles ask" in page
    assert ">Fresh</span>" in page
    assert "data-ray-notice" not in page


def test_only_an_admin_is_shown_rays_dashboard_and_its_token(as_alice: Client, admin: User) -> None:
    ray_up()
    ClusterState.objects.filter(name="default").update(ray_auth="token")
    ensure_token(token_file_from_settings())
    page = text_of(as_alice.get("/cluster/"))
    assert ">Fresh</span>" in page
    assert "8265" not in page and "data-dashboard" not in page
    assert "data-ray-auth" not in page and str(token_file_from_settings()) not in page
    as_alice.force_login(admin)
    page = text_of(as_alice.get("/cluster/"))
    assert 'Dashboard <code class="path">http://10.0.0.1:8265</code>' in page
    assert 'data-ray-auth="token"' in page and ">Demanded</span>" in page
    assert f'Argus sends the token in <code class="path">{token_file_from_settings()}</code>' in page


def test_an_admin_is_warned_of_a_cluster_that_demands_no_token(as_alice: Client, admin: User) -> None:
    ray_up()
    ClusterState.objects.filter(name="default").update(ray_auth="disabled")
    as_alice.force_login(admin)
    page = text_of(as_alice.get("/cluster/"))
    assert 'data-ray-auth="disabled"' in page and ">Not demanded</span>" in page
    assert "users' secrets included" in page
    assert "Argus has no token" in page


def test_the_cluster_without_any_ray_data(as_alice: Client) -> None:
    page = text_of(as_alice.get("/cluster/"))
    assert NO_RAY in page and "The scheduler has not looked at Ray yet" in page
    assert "Not published" in page and "No nodes known." in page


def test_the_cluster_when_ray_went_away(as_alice: Client, admin: User) -> None:
    ray_down("RayUnavailable: ConnectionError: 10.0.0.1:8265 refused")
    page = text_of(as_alice.get("/cluster/"))
    assert NO_RAY in page and "Unknown while Ray is not reachable." in page
    # Ray's errors name the dashboard: a user is told it did not answer, an admin why.
    assert "8265" not in page and escape(ERROR_FOR_USERS) in page
    assert "8265" not in text_of(as_alice.get("/tasks/"))
    as_alice.force_login(admin)
    assert "10.0.0.1:8265 refused" in text_of(as_alice.get("/cluster/"))


def test_a_scheduler_that_stopped_looking_is_pointed_out(as_alice: Client) -> None:
    ray_up(checked_ago=timedelta(minutes=10))
    page = text_of(as_alice.get("/cluster/"))
    assert "The scheduler last looked at Ray 10\xa0minutes ago." in page


# --- every page, with and without Ray --------------------------------------------------------


@pytest.mark.parametrize("url", [*PAGES, "/tasks/{task_id}/"])
@pytest.mark.parametrize("ray", ["none", "down", "up"])
def test_every_page_renders_with_and_without_ray(
    as_alice: Client, alice: User, make_task: MakeTask, url: str, ray: str
) -> None:
    if ray == "up":
        ray_up()
    elif ray == "down":
        ray_down()
    url = url.format(task_id=make_task(alice).task_id)
    response = as_alice.get(url)
    assert response.status_code == 200
    assert (NO_RAY in text_of(response)) is (ray != "up")


# --- durable training: resumes and the time limit ------------------------------------------


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> datetime:
    """Django's clock stopped at the real now: the time left is exact, and the template's
    "48 minutes ago" (timesince reads the real clock) agrees with it."""
    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)
    return now


def test_the_task_page_says_where_each_attempt_started_and_the_time_left(
    as_alice: Client, alice: User, make_task: MakeTask, frozen: datetime
) -> None:
    task = resumed_task(make_task, alice, time_limit_s=2 * 3600, started_ago=timedelta(minutes=48))
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    assert re.search(r"Running, started 48\xa0minutes ago: attempt 2, resumed from step 3\.", page)
    assert '<span class="time-left" data-time-left>Time limit 2 h; 1 h 12 min left.</span>' in page
    assert "<span>time limit 2 h</span>" in page
    rows = dict(re.findall(r'<tr data-attempt="(\d)">(.*?)</tr>', page, re.S))
    assert '<span class="muted">started from scratch</span>' in rows["1"]
    assert '<span class="resumed">resumed from step 3</span>' in rows["2"]
    # The curves' key is filled by static/js/task.js; the page has its place, hidden until then.
    assert '<p class="chart-seams" data-seams hidden></p>' in page
    # A Content-Security-Policy is coming: no inline style or script in what the page shows.
    assert " style=" not in page
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)


def test_little_time_left_stands_out(as_alice: Client, alice: User, make_task: MakeTask, frozen: datetime) -> None:
    task = resumed_task(make_task, alice, time_limit_s=2 * 3600, started_ago=timedelta(hours=1, minutes=50, seconds=30))
    part = text_of(as_alice.get(f"/tasks/{task.task_id}/", HTTP_HX_REQUEST="true"))
    assert '<span class="time-left time-left-low" data-time-left>Time limit 2 h; 9 min left.</span>' in part
    over = resumed_task(make_task, alice, time_limit_s=2 * 3600, started_ago=timedelta(hours=2, minutes=1))
    part = text_of(as_alice.get(f"/tasks/{over.task_id}/", HTTP_HX_REQUEST="true"))
    assert "Time limit 2 h; under a minute left." in part  # the scheduler stops it at its next look


@pytest.mark.parametrize(
    ("changes", "limit_shown"),
    [({"time_limit_s": None}, False), ({"state": TaskState.SUCCEEDED, "finished_at": timezone.now()}, True)],
)
def test_no_time_left_without_a_limit_or_once_finished(
    as_alice: Client, alice: User, make_task: MakeTask, frozen: datetime, changes: dict, limit_shown: bool
) -> None:
    task = resumed_task(make_task, alice, started_ago=timedelta(minutes=10), **{"time_limit_s": 2 * 3600, **changes})
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    assert "data-time-left" not in page and " left." not in page
    assert ("<span>time limit 2 h</span>" in page) is limit_shown


@pytest.mark.parametrize(
    ("seconds", "words"), [(45, "45 s"), (600, "10 min"), (5400, "1 h 30 min"), (7200, "2 h"), (93600, "26 h")]
)
def test_a_time_limit_in_words(seconds: int, words: str) -> None:
    assert format_seconds(seconds) == words  # the one way Argus says a duration


def test_an_advanced_tasks_page_shows_its_command_once_as_bash_runs_it(as_alice: Client) -> None:
    spec = (
        "kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: 1\n"
        "command: python3 -m verl.trainer.main_ppo trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR"
        " trainer.logger=[console]\n"
    )
    response = as_alice.post("/tasks/new/", {"spec": spec})
    assert response.status_code == 302, text_of(response)
    task = Task.objects.get()
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    run = re.search(
        r'<h3>Command</h3>\s*<pre class="code">([^<]*)</pre>\s*<h3>Resolved spec</h3>\s*'
        r'<pre class="code">([^<]*)</pre>',
        page,
    )
    assert run is not None
    # The command itself, not `env ARGUS_CHECKPOINT_DIR=… bash -c` split one word a line; the
    # checkpoint folder written in and verl's file logger added, as bash receives it.
    checkpoints = f"{home_dir('alice')}/jobs/{task.task_id}"
    assert run.group(1).startswith(f"python3 -m verl.trainer.main_ppo trainer.default_local_dir={checkpoints}")
    assert html.unescape(run.group(1)).endswith(""" 'trainer.logger=["console","file"]'""")  # Hydra: the last wins
    assert "ARGUS_CHECKPOINT_DIR" not in run.group(1) and "bash -c" not in run.group(1)
    # Shown once: the resolved spec below it does not repeat the command.
    assert "command:" not in run.group(2) and "verl.trainer.main_ppo" not in run.group(2)
