"""The sweep pages through Django's test client: who may see and cancel what, the list, the
trials' table and the curves the chart is drawn from, the task page's link to its sweep, and
the new-task form taking a sweep document (the browser: tests/web/test_sweep_browser.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.template.loader import render_to_string
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tasks.choices import SweepState, TaskState
from tasks.models import Task
from tasks.queue.reasons import PendingReason
from tasks.sweeps.document import is_sweep_document, parse_sweep
from tasks.sweeps.models import Sweep, TrialCurve
from tasks.sweeps.web.views import param_labels
from tasks.web.views import SWEEP_TEMPLATES
from tests.tasks.sweeps.trials import BATCH, LR, METRIC, make_sweep

pytestmark = pytest.mark.django_db
S = TaskState

GRID = [{LR: lr, BATCH: batch} for lr in (1e-6, 3e-6) for batch in (256, 512)]
CURVES = [[(10, 0.2), (20, 0.5), (30, 0.4)], [(10, 0.1)], None, [(10, 0.3), (20, 0.6)]]


def text_of(response: Any) -> str:
    return response.content.decode()


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


@pytest.fixture
def sweep_and_trials(alice: User, make_task) -> tuple[Sweep, list[Task]]:
    return make_sweep(alice, make_task, GRID, curves=CURVES)


@pytest.fixture
def sweep(sweep_and_trials: tuple[Sweep, list[Task]]) -> Sweep:
    return sweep_and_trials[0]


def row_of(page: str, task_id: str) -> str:
    row = page[page.index(f'<tr data-trial="{task_id}"') :]
    return row[: row.index("</tr>")]


# --- who may see what ----------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/sweeps/", "/sweeps/{sweep_id}/"])
def test_signed_out_visitors_are_sent_to_sign_in(client: Client, sweep: Sweep, url: str) -> None:
    url = url.format(sweep_id=sweep.sweep_id)
    response = client.get(url)
    assert response.status_code == 302 and response["Location"] == f"/login/?next={url}"


def test_another_users_sweep_is_a_404_and_cannot_be_canceled(client: Client, bob: User, sweep: Sweep) -> None:
    client.force_login(bob)
    response = client.get(f"/sweeps/{sweep.sweep_id}/")
    assert response.status_code == 404 and sweep.sweep_id not in text_of(response)
    assert client.post(f"/sweeps/{sweep.sweep_id}/cancel/").status_code == 404
    assert not Task.objects.filter(state=S.CANCELED).exists()


def test_a_user_lists_only_their_own_sweeps(as_alice: Client, bob: User, make_task, sweep: Sweep) -> None:
    theirs, _ = make_sweep(bob, make_task, GRID[:1])
    page = text_of(as_alice.get("/sweeps/"))
    assert sweep.sweep_id in page and theirs.sweep_id not in page
    assert '<th scope="col">User</th>' not in page
    assert '<a href="/sweeps/" aria-current="page">Sweeps</a>' in page


def test_an_admin_sees_everyones_sweeps(client: Client, admin: User, bob: User, make_task, sweep: Sweep) -> None:
    theirs, _ = make_sweep(bob, make_task, GRID[:1])
    client.force_login(admin)
    page = text_of(client.get("/sweeps/"))
    assert '<th scope="col">User</th>' in page and sweep.sweep_id in page and theirs.sweep_id in page
    detail = client.get(f"/sweeps/{sweep.sweep_id}/")
    assert detail.status_code == 200 and "by alice" in text_of(detail)


# --- the list ------------------------------------------------------------------------------


def test_the_list_counts_each_sweeps_trials_and_filters_by_state(
    as_alice: Client, sweep_and_trials: tuple[Sweep, list[Task]], alice: User, make_task
) -> None:
    sweep, trials = sweep_and_trials
    Task.objects.filter(pk=trials[1].pk).update(state=S.CANCELED, early_stopped=True, finished_at=timezone.now())
    Task.objects.filter(pk=trials[2].pk).update(state=S.SUCCEEDED, finished_at=timezone.now())
    ended, _ = make_sweep(alice, make_task, GRID[:1], name="done")
    Sweep.objects.filter(pk=ended.pk).update(state=SweepState.FAILED)
    page = text_of(as_alice.get("/sweeps/"))
    row = page[page.index(f'<tr data-sweep="{sweep.sweep_id}">') :]
    row = row[: row.index("</tr>")]
    assert "lr-sweep" in row and "Running" in row
    assert "2 of 4 ended, 1 stopped early" in row and "at most 2 at once" in row and METRIC in row
    failed = text_of(as_alice.get("/sweeps/?state=FAILED"))
    assert ended.sweep_id in failed and sweep.sweep_id not in failed


# --- a sweep's page ------------------------------------------------------------------------


def test_the_page_shows_each_trial_in_order_with_its_params_and_values(
    as_alice: Client, sweep_and_trials: tuple[Sweep, list[Task]]
) -> None:
    sweep, trials = sweep_and_trials
    Task.objects.filter(pk=trials[1].pk).update(state=S.CANCELED, early_stopped=True, finished_at=timezone.now())
    page = text_of(as_alice.get(f"/sweeps/{sweep.sweep_id}/"))
    assert re.findall(r'<tr data-trial="([^"]+)"', page) == [task.task_id for task in trials]
    # Each parameter a column, headed by its short name, the whole key on hover.
    assert f'title="{LR}"><button type="button" class="sort">lr</button>' in page
    assert f'title="{BATCH}"><button type="button" class="sort">train_batch_size</button>' in page
    first = row_of(page, trials[0].task_id)
    assert "<code>1e-06</code>" in first and "<code>256</code>" in first
    assert '<td data-value="30">30</td>' in first  # the last step
    assert '<td data-value="0.5">0.5</td>' in first and '<td data-value="0.4">0.4</td>' in first
    stopped = row_of(page, trials[1].task_id)
    assert "Canceled" in stopped and "stopped early" in stopped
    assert '<td data-value="">—</td>' in row_of(page, trials[2].task_id)  # no curve yet
    # The best trial (0.6 at step 20) is marked, and named above the chart.
    best = trials[3].task_id
    assert 'data-best class="best-trial"' in row_of(page, best) and "data-best" not in first
    assert f"data-best-link>{best}</a>" in page
    assert "1 of 4 trials ended, 1 stopped early." in page


def test_the_chart_gets_every_trial_with_points_labelled_by_its_params(
    as_alice: Client, sweep_and_trials: tuple[Sweep, list[Task]]
) -> None:
    sweep, trials = sweep_and_trials
    response = as_alice.get(f"/sweeps/{sweep.sweep_id}/")
    page = text_of(response)
    found = re.search(r'<script id="sweep-curves" type="application/json">(.*?)</script>', page, re.S)
    assert found is not None
    curves = json.loads(found.group(1))
    assert curves["metric"] == METRIC and curves["mode"] == "max"
    # Trial 2 has no point yet: no line to draw.
    assert [(t["task_id"], t["label"], t["best"]) for t in curves["trials"]] == [
        (trials[0].task_id, "lr=1e-06, train_batch_size=256", False),
        (trials[1].task_id, "lr=1e-06, train_batch_size=512", False),
        (trials[3].task_id, "lr=3e-06, train_batch_size=512", True),
    ]
    assert curves["trials"][0]["points"] == [[10, 0.2], [20, 0.5], [30, 0.4]]
    assert 'src="/static/vendor/uplot/uPlot.iife.min.js"' in page and 'src="/static/js/sweep.js"' in page


def test_a_running_sweep_polls_and_an_ended_one_does_not(as_alice: Client, sweep: Sweep) -> None:
    running = text_of(as_alice.get(f"/sweeps/{sweep.sweep_id}/"))
    assert 'hx-select="#sweep-live"' in running and "Best so far: <a" in running
    part = as_alice.get(f"/sweeps/{sweep.sweep_id}/", HTTP_HX_REQUEST="true")
    assert text_of(part).lstrip().startswith('<section id="sweep-live"')
    Sweep.objects.filter(pk=sweep.pk).update(state=SweepState.SUCCEEDED, finished_at=timezone.now())
    page = text_of(as_alice.get(f"/sweeps/{sweep.sweep_id}/"))
    assert 'hx-select="#sweep-live"' not in page and "Cancel sweep" not in page
    # Its best is final now, not "so far".
    assert "Best trial: <a" in page and "Best so far" not in page


def test_param_labels_shorten_keys_unless_two_would_read_the_same() -> None:
    keys = [LR, "actor_rollout_ref.actor.kl_loss_coef", "critic.kl_loss_coef", "model_id"]
    assert param_labels(keys) == {
        LR: "lr",
        "actor_rollout_ref.actor.kl_loss_coef": "actor_rollout_ref.actor.kl_loss_coef",
        "critic.kl_loss_coef": "critic.kl_loss_coef",
        "model_id": "model_id",
    }


# --- cancel --------------------------------------------------------------------------------


def test_cancel_cancels_every_trial_not_ended(as_alice: Client, sweep_and_trials: tuple[Sweep, list[Task]]) -> None:
    sweep, trials = sweep_and_trials
    Task.objects.filter(pk=trials[0].pk).update(state=S.SUCCEEDED, finished_at=timezone.now())
    page = text_of(as_alice.get(f"/sweeps/{sweep.sweep_id}/"))
    assert f'data-confirm="Cancel sweep {sweep.sweep_id}?' in page and 'name="csrfmiddlewaretoken"' in page
    response = as_alice.post(f"/sweeps/{sweep.sweep_id}/cancel/", follow=True)
    assert response.redirect_chain == [(f"/sweeps/{sweep.sweep_id}/", 302)]
    states = dict(Task.objects.filter(sweep=sweep).values_list("trial_index", "state"))
    assert states == {0: S.SUCCEEDED, 1: S.CANCELED, 2: S.CANCELED, 3: S.CANCELED}
    sweep.refresh_from_db()
    assert sweep.canceled_at is not None
    assert any(message.startswith(f"Sweep {sweep.sweep_id}") for message in messages_of(response))


def test_cancel_is_a_post_with_the_csrf_token(alice: User, sweep: Sweep) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    assert browser.get(f"/sweeps/{sweep.sweep_id}/cancel/").status_code == 405
    assert browser.post(f"/sweeps/{sweep.sweep_id}/cancel/").status_code == 403
    assert not Task.objects.filter(state=S.CANCELED).exists()


def test_an_ended_sweep_has_nothing_to_cancel(as_alice: Client, sweep: Sweep) -> None:
    Sweep.objects.filter(pk=sweep.pk).update(state=SweepState.FAILED, finished_at=timezone.now())
    response = as_alice.post(f"/sweeps/{sweep.sweep_id}/cancel/", follow=True)
    assert messages_of(response) == [f"Sweep {sweep.sweep_id} had already ended (failed): nothing to cancel."]
    assert not Task.objects.filter(state=S.CANCELED).exists()


# --- the task page -------------------------------------------------------------------------


def test_a_trials_page_links_its_sweep_and_shows_its_params(
    as_alice: Client, sweep_and_trials: tuple[Sweep, list[Task]]
) -> None:
    sweep, trials = sweep_and_trials
    Task.objects.filter(pk=trials[1].pk).update(state=S.CANCELED, early_stopped=True)
    page = text_of(as_alice.get(f"/tasks/{trials[1].task_id}/"))
    assert f'trial 1 of sweep <a id="sweep-link" href="/sweeps/{sweep.sweep_id}/">{sweep.sweep_id}</a>' in page
    assert f"<code>{LR}=1e-06</code>" in page and f"<code>{BATCH}=512</code>" in page
    assert "stopped early by the sweep" in page


def test_a_trial_waiting_for_a_place_says_so_not_that_it_waits_for_dependencies(
    as_alice: Client, sweep_and_trials: tuple[Sweep, list[Task]]
) -> None:
    _, trials = sweep_and_trials
    Task.objects.filter(pk=trials[3].pk).update(state=S.WAITING, queued_at=None)
    PendingReason.objects.create(task=trials[3], text="sweep lr-sweep: 2 of 2 trials running")
    page = text_of(as_alice.get(f"/tasks/{trials[3].task_id}/"))
    assert "Waiting for a place under its sweep's max_concurrent (sweep lr-sweep: 2 of 2 trials running)" in page
    assert "Held for its dependencies" not in page


def test_a_task_of_no_sweep_shows_none(as_alice: Client, alice: User, make_task) -> None:
    task = make_task(alice)
    page = text_of(as_alice.get(f"/tasks/{task.task_id}/"))
    assert task.task_id in page and "data-sweep-facts" not in page


# --- the new-task form takes a sweep document ----------------------------------------------


def test_the_form_offers_the_sweep_template(as_alice: Client) -> None:
    page = text_of(as_alice.get("/tasks/new/"))
    for key, label in SWEEP_TEMPLATES:
        assert f'data-template="{key}"' in page and f">{label}</button>" in page
        assert f'<script type="text/yaml" id="spec-template-{key}"' in page


def test_the_sweep_template_is_a_valid_document(alice: User, datasets: Path) -> None:
    text = render_to_string("tasks/specs/sweep.yaml")
    assert is_sweep_document(text)
    document = parse_sweep(text, user=alice)
    assert [trial.params for trial in document.trials] == [
        {LR: lr, BATCH: batch} for lr in (1e-6, 3e-6, 1e-5) for batch in (256, 512)
    ]
    assert (document.max_concurrent, document.early_stop) == (2, {"min_steps": 10, "eta": 2})
    assert all(trial.parsed.warnings == [] for trial in document.trials)


def test_a_sweep_document_is_submitted_and_opens_its_page(as_alice: Client, datasets: Path) -> None:
    text = render_to_string("tasks/specs/sweep.yaml")
    response = as_alice.post("/tasks/new/", {"spec": text})
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/sweeps/{sweep.sweep_id}/"
    assert sweep.document == text and sweep.trials.count() == 6
    page = as_alice.get(response["Location"])
    assert messages_of(page) == [f"Sweep {sweep.sweep_id} is submitted: 6 trials, 2 queued now, 4 waiting their turn."]


def test_a_refused_sweep_names_the_field_and_keeps_the_text(as_alice: Client, datasets: Path) -> None:
    text = render_to_string("tasks/specs/sweep.yaml").replace("[256, 512]", "[]")
    response = as_alice.post("/tasks/new/", {"spec": text})
    assert response.status_code == 400
    page = text_of(response)
    assert "The sweep was not submitted" in page
    assert f'<li data-field="grid.{BATCH}">' in page
    assert not Sweep.objects.exists() and not Task.objects.exists()


def live_part_queries(client: Client, *sweeps: Sweep) -> list[int]:
    """How many queries each sweep's live part (what the page polls) reads."""
    counts = []
    for sweep in sweeps:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/sweeps/{sweep.sweep_id}/", HTTP_HX_REQUEST="true").status_code == 200
        counts.append(len(queries))
    return counts


def test_the_live_part_reads_a_fixed_number_of_queries(as_alice: Client, alice: User, make_task) -> None:
    small, _ = make_sweep(alice, make_task, GRID[:1], curves=CURVES[:1])
    large, _ = make_sweep(alice, make_task, GRID * 3, curves=CURVES * 3)
    counts = live_part_queries(as_alice, small, large)
    assert counts[0] == counts[1], counts


def test_copy_to_a_new_sweep_fills_the_form_with_its_document(
    as_alice: Client, alice: User, bob: User, make_task, datasets: Path
) -> None:
    text = render_to_string("tasks/specs/sweep.yaml")
    as_alice.post("/tasks/new/", {"spec": text})
    sweep = Sweep.objects.get()
    page = text_of(as_alice.get(f"/sweeps/{sweep.sweep_id}/"))
    assert f'href="/tasks/new/?from_sweep={sweep.sweep_id}"' in page
    form = as_alice.get(f"/tasks/new/?from_sweep={sweep.sweep_id}")
    assert form.context["spec"] == text
    theirs, _ = make_sweep(bob, make_task, GRID[:1])
    assert as_alice.get(f"/tasks/new/?from_sweep={theirs.sweep_id}").context["spec"] == ""


def test_a_waiting_or_queued_trial_says_why_in_the_table(
    as_alice: Client, alice: User, make_task, sweep_and_trials: tuple[Sweep, list[Task]]
) -> None:
    sweep, trials = sweep_and_trials
    Task.objects.filter(pk=trials[3].pk).update(state=S.WAITING, queued_at=None)
    PendingReason.objects.create(task=trials[3], text="sweep lr-sweep: 2 of 2 trials running")
    Task.objects.filter(pk=trials[1].pk).update(state=S.PENDING_RESOURCES)
    PendingReason.objects.create(task=trials[1], text="waiting for 4 GPUs on one node")
    PendingReason.objects.create(task=trials[2], text="needs 4 GPUs on one node; at most 2 free")
    Task.objects.filter(pk=trials[0].pk).update(state=S.SUCCEEDED, finished_at=timezone.now())
    PendingReason.objects.create(task=trials[0], text="an old reason, from before it ran")
    page = text_of(as_alice.get(f"/sweeps/{sweep.sweep_id}/"))
    assert '<small class="pending-reason" data-pending>sweep lr-sweep: 2 of 2 trials running</small>' in row_of(
        page, trials[3].task_id
    )
    assert "needs 4 GPUs on one node; at most 2 free" in row_of(page, trials[2].task_id)
    assert "waiting for 4 GPUs on one node" in row_of(page, trials[1].task_id)
    # An ended trial's reason is history, not why it waits.
    assert "data-pending" not in row_of(page, trials[0].task_id) and "an old reason" not in page
    # Read with the trials (one join), not a query per row: the live part is polled.
    small, _ = make_sweep(alice, make_task, GRID[:1])
    large, large_trials = make_sweep(alice, make_task, GRID * 3)
    for task in large_trials:
        PendingReason.objects.create(task=task, text="sweep lr-sweep: 2 of 2 trials running")
    counts = live_part_queries(as_alice, small, large)
    assert counts[0] == counts[1], counts


def test_a_canceled_sweep_whose_trials_are_still_stopping_says_so(
    as_alice: Client, sweep_and_trials: tuple[Sweep, list[Task]]
) -> None:
    sweep, trials = sweep_and_trials
    now = timezone.now()
    Sweep.objects.filter(pk=sweep.pk).update(canceled_at=now)
    Task.objects.filter(pk=trials[0].pk).update(state=S.RUNNING, cancel_requested_at=now)
    Task.objects.filter(pk__in=[t.pk for t in trials[1:]]).update(state=S.CANCELED, finished_at=now)
    page = text_of(as_alice.get(f"/sweeps/{sweep.sweep_id}/"))
    assert "Canceled: the trials still on Ray stop once Ray reports their jobs stopped." in page
    # Not that the others wait their turn: none will run.
    assert "wait their turn" not in page and "Cancel sweep" not in page
    assert 'hx-select="#sweep-live"' in page  # it still polls until the sweep has ended


def test_params_read_in_the_documents_order_however_the_database_keeps_them(
    as_alice: Client, alice: User, make_task
) -> None:
    # PostgreSQL's jsonb gives a mapping's keys back shorter first: the params as it returns them.
    stored = [{BATCH: batch, LR: lr} for lr, batch in ((1e-6, 256), (3e-6, 512))]
    sweep, trials = make_sweep(alice, make_task, stored, curves=[[(10, 0.1)], [(10, 0.2)]])
    Sweep.objects.filter(pk=sweep.pk).update(
        document=f"name: lr-sweep\ngrid:\n  {LR}: [1.0e-6, 3.0e-6]\n  {BATCH}: [256, 512]\n"
    )
    page = text_of(as_alice.get(f"/sweeps/{sweep.sweep_id}/"))
    assert page.index(f'title="{LR}"') < page.index(f'title="{BATCH}"')
    assert re.search(r"<code>1e-06</code></td><td[^>]*><code>256</code>", row_of(page, trials[0].task_id))
    found = re.search(r'<script id="sweep-curves" type="application/json">(.*?)</script>', page, re.S)
    assert found is not None
    assert json.loads(found.group(1))["trials"][0]["label"] == "lr=1e-06, train_batch_size=256"
    body = as_alice.get(f"/api/v2/sweeps/{sweep.sweep_id}").json()
    assert [list(trial["params"]) for trial in body["trials"]] == [[LR, BATCH], [LR, BATCH]]


def test_cancel_of_a_sweep_that_ends_succeeded_says_so(as_alice: Client, alice: User, make_task) -> None:
    sweep, trials = make_sweep(alice, make_task, GRID)  # no trial has run (no curve left to read)
    ended = timezone.now()
    Task.objects.filter(pk=trials[0].pk).update(state=S.SUCCEEDED, finished_at=ended)
    TrialCurve.objects.filter(task=trials[0]).update(read_at=ended)  # the tick read its last values
    # A trial had succeeded and the others wait: canceled at once, the sweep ends SUCCEEDED.
    response = as_alice.post(f"/sweeps/{sweep.sweep_id}/cancel/", follow=True)
    sweep.refresh_from_db()
    assert sweep.state == SweepState.SUCCEEDED
    assert messages_of(response) == [
        f"Sweep {sweep.sweep_id}: every trial not ended is canceled; it succeeded (a trial had succeeded)."
    ]


def test_a_min_metric_marks_the_lowest_and_sorts_it_first(as_alice: Client, alice: User, make_task) -> None:
    # A loss: the best trial is the one with the lowest value (a NaN verl logged, null, is no value).
    curves = [[(10, 0.9), (20, 0.4)], [(10, 0.5), (20, None)], [(10, 0.7)]]
    sweep, trials = make_sweep(alice, make_task, GRID[:3], curves=curves, mode="min")  # type: ignore[arg-type]
    page = text_of(as_alice.get(f"/sweeps/{sweep.sweep_id}/"))
    assert 'data-best class="best-trial"' in row_of(page, trials[0].task_id)
    assert '<th scope="col" data-sort="best" data-mode="min">' in page
    assert '<td data-value="0.5">0.5</td>' in row_of(page, trials[1].task_id)  # best and last: 0.5
    body = as_alice.get(f"/api/v2/sweeps/{sweep.sweep_id}").json()
    assert body["best_trial"] == trials[0].task_id
    assert [(t["best_value"], t["last_value"]) for t in body["trials"]] == [(0.4, 0.4), (0.5, 0.5), (0.7, 0.7)]
