from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from accounts.models import ApiToken
from tasks.choices import EventKind, TaskState
from tasks.models import Task
from tests.conftest import PPO_SPEC

pytestmark = pytest.mark.django_db

TASK_ROUTES = [
    ("get", "/api/v2/tasks/{id}"),
    ("get", "/api/v2/tasks/{id}/spec"),
    ("get", "/api/v2/tasks/{id}/events"),
    ("post", "/api/v2/tasks/{id}/cancel"),
]


def _error(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]), body
    return body["error"]


# --- submit --------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["application/yaml", "text/yaml", "text/plain"])
def test_it_accepts_yaml_text(alice, client_for, datasets, content_type):
    response = client_for(alice).post("/api/v2/tasks", PPO_SPEC, content_type=content_type)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "QUEUED"
    assert body["task_id"].startswith("alice-ppo-")
    assert response["Location"] == f"/api/v2/tasks/{body['task_id']}"
    task = Task.objects.get(task_id=body["task_id"])
    assert task.spec_raw == PPO_SPEC
    assert task.user == alice


def test_it_accepts_json_wrapping_yaml(alice, client_for, datasets):
    response = client_for(alice).post("/api/v2/tasks", {"spec": PPO_SPEC}, format="json")
    assert response.status_code == 201, response.content


def test_it_accepts_the_spec_as_a_json_object(alice, client_for, datasets):
    spec = {
        "workload": "grpo",
        "nnodes": 1,
        "n_gpus_per_node": 2,
        "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
        "train_file": "$HOME/common/datasets/gsm8k/train.parquet",
        "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
    }
    response = client_for(alice).post("/api/v2/tasks", spec, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["workload"] == "grpo"
    assert response.json()["n_gpus_per_node"] == 2


def test_it_returns_warnings_with_the_task(alice, client_for):
    spec = "kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: 1\ncommand: python3 -m verl.trainer.main_ppo\n"
    response = client_for(alice).post("/api/v2/tasks", spec, content_type="application/yaml")
    assert response.status_code == 201, response.content
    assert any("data.train_files" in warning for warning in response.json()["warnings"])


def test_it_rejects_an_invalid_spec_naming_each_field(alice, client_for, datasets):
    spec = "workload: dance\nnnodes: 0\nn_gpus_per_node: 4\ncolour: blue\n"
    response = client_for(alice).post("/api/v2/tasks", spec, content_type="application/yaml")
    assert response.status_code == 400
    error = _error(response)
    assert error["code"] == "invalid"
    assert {"workload", "nnodes", "colour", "model_id"} <= set(error["fields"])
    assert not Task.objects.exists()


def test_it_answers_413_to_a_huge_spec(alice, client_for):
    spec = "workload: ppo\n" + "#" * (70 * 1024)
    response = client_for(alice).post("/api/v2/tasks", spec, content_type="application/yaml")
    assert response.status_code == 413
    assert _error(response)["code"] == "too_large"
    assert not Task.objects.exists()


def test_it_rejects_non_utf8_bytes(alice, client_for):
    response = client_for(alice).post("/api/v2/tasks", b"workload: \xff\xfe\n", content_type="application/yaml")
    assert response.status_code == 400
    assert _error(response)["fields"]


def test_it_rejects_broken_json(alice, client_for):
    response = client_for(alice).post("/api/v2/tasks", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert _error(response)["code"] == "parse_error"


def _nested_json(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        ("workload: ppo\x01\nnnodes: 1\n", "application/yaml", "invalid"),
        ("nnodes: 0x" + "f" * 20000 + "\n", "text/plain", "invalid"),
        ("[" * 5000, "application/json", "parse_error"),
        # Deep enough that yaml.dump would overflow the stack (400 levels do, from the top), shallow
        # enough that json.loads parses it below any runner's frames (900 did not under xdist).
        (_nested_json(400), "application/json", "invalid"),
        ('{"nnodes": ' + "9" * 5000 + "}", "application/json", "parse_error"),
        ('{"nnodes": NaN}', "application/json", "parse_error"),
        (b'{"spec": "\xff"}', "application/json", "parse_error"),
        ('{"\\udb7e\\udd49-": {}, "a": "\u00f1m"}', "text/plain", "invalid"),
    ],
    ids=[
        "control-character",
        "huge-hex",
        "deep-json-array",
        "deep-json-object",
        "huge-json-int",
        "nan",
        "bad-utf8",
        "surrogate-escape",
    ],
)
def test_no_body_is_a_500(alice, client_for, body, content_type, code):
    response = client_for(alice).post("/api/v2/tasks", body, content_type=content_type)
    assert response.status_code == 400, response.content
    assert _error(response)["code"] == code
    assert not Task.objects.exists()


def test_a_json_body_over_the_size_limit_gets_the_json_error(alice, client_for, settings):
    body = json.dumps({"spec": "#" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE})
    response = client_for(alice).post("/api/v2/tasks", body, content_type="application/json")
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert _error(response)["code"] == "too_large"


def test_it_rejects_an_unknown_content_type(alice, client_for):
    response = client_for(alice).post("/api/v2/tasks", "x", content_type="application/x-thing")
    assert response.status_code == 415
    _error(response)


def test_anonymous_cannot_submit(client_for, datasets):
    response = client_for(None).post("/api/v2/tasks", PPO_SPEC, content_type="application/yaml")
    assert response.status_code == 401
    assert _error(response)["code"] == "not_authenticated"


# --- list ----------------------------------------------------------------------------------


def test_list_shows_own_tasks_newest_first(alice, bob, client_for, make_task):
    older = make_task(alice, created_at=timezone.now() - timedelta(minutes=5))
    newer = make_task(alice)
    make_task(bob)
    body = client_for(alice).get("/api/v2/tasks").json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == 2
    assert [row["task_id"] for row in body["results"]] == [newer.task_id, older.task_id]


def test_admin_lists_everyones_tasks(alice, bob, admin, client_for, make_task):
    make_task(alice)
    make_task(bob)
    body = client_for(admin).get("/api/v2/tasks").json()
    assert {row["user"] for row in body["results"]} == {"alice", "bob"}


def test_list_filters_by_state_and_workload(alice, client_for, make_task):
    queued = make_task(alice)
    make_task(alice, state=TaskState.FAILED)
    client = client_for(alice)
    body = client.get("/api/v2/tasks?state=QUEUED").json()
    assert [row["task_id"] for row in body["results"]] == [queued.task_id]
    assert client.get("/api/v2/tasks?workload=sft").json()["count"] == 0
    assert client.get("/api/v2/tasks?workload=ppo").json()["count"] == 2


def test_list_rejects_an_unknown_state_filter(alice, client_for):
    response = client_for(alice).get("/api/v2/tasks?state=SLEEPING")
    assert response.status_code == 400
    assert "state" in _error(response)["fields"]


def test_list_pages(alice, client_for, make_task):
    for _ in range(3):
        make_task(alice)
    body = client_for(alice).get("/api/v2/tasks?page_size=2").json()
    assert len(body["results"]) == 2
    assert body["next"]


def test_list_query_count_does_not_grow_with_tasks(alice, client_for, make_task, django_assert_max_num_queries):
    for n in range(10):
        make_task(alice, pending_reason="behind 1 task" if n % 2 else "")  # a reason is a row of its own
    client = client_for(alice)
    # auth lookup + token touch + count + page (the reasons joined in)
    with django_assert_max_num_queries(5):
        response = client.get("/api/v2/tasks")
    assert response.json()["count"] == 10


def test_a_submission_costs_few_queries_and_answers_the_new_task_whole(
    alice, client_for, datasets, django_assert_max_num_queries
):
    client = client_for(alice)
    client.post("/api/v2/tasks", PPO_SPEC, content_type="application/yaml")  # the token's last use written
    # The auth lookup, the task and its event in two savepoints (the tick's mark runs on commit,
    # which a test's transaction never reaches): not the new task's attempts nor its reason.
    with django_assert_max_num_queries(7):
        response = client.post("/api/v2/tasks", PPO_SPEC, content_type="application/yaml")
    assert response.status_code == 201
    body = response.json()
    assert (body["attempts"], body["pending_reason"], body["time_left_s"]) == ([], "", None)
    assert body == client.get(f"/api/v2/tasks/{body['task_id']}").json()


def test_detail_query_count(alice, client_for, make_task, django_assert_max_num_queries):
    task = make_task(alice)
    client = client_for(alice)
    with django_assert_max_num_queries(5):
        response = client.get(f"/api/v2/tasks/{task.task_id}")
    assert response.status_code == 200


# --- detail, spec, events ------------------------------------------------------------------


def test_detail_has_the_documented_fields(alice, client_for, make_task):
    task = make_task(alice)
    task.attempts.create(attempt_no=1, ray_submission_id=f"{task.task_id}--a01", ray_status="FAILED")
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}").json()
    expected = {
        "task_id",
        "user",
        "workload",
        "kind",
        "state",
        "nnodes",
        "n_gpus_per_node",
        "priority",
        "created_at",
        "updated_at",
        "error_summary",
        "attempts",
    }
    assert expected <= set(body)
    attempt = body["attempts"][0]
    assert {
        "attempt_no",
        "ray_submission_id",
        "ray_status",
        "failure_kind",
        "message",
        "start_time",
        "end_time",
    } <= set(attempt)
    assert attempt["ray_submission_id"] == f"{task.task_id}--a01"


def test_detail_says_preemptible_and_the_estimated_start_of_a_waiting_task(alice, client_for, make_task):
    start = timezone.now().replace(microsecond=0) + timedelta(hours=1)
    task = make_task(alice, preemptible=True, estimated_start_at=start, pending_reason="waiting its turn")
    client = client_for(alice)
    body = client.get(f"/api/v2/tasks/{task.task_id}").json()
    assert body["preemptible"] is True and body["pending_reason"] == "waiting its turn"
    assert body["estimated_start_at"] == start.isoformat().replace("+00:00", "Z")
    # The scheduler leaves its last estimate in place once the task starts: not shown then.
    Task.objects.filter(pk=task.pk).update(state=TaskState.RUNNING)
    assert client.get(f"/api/v2/tasks/{task.task_id}").json()["estimated_start_at"] is None
    assert client.get("/api/v2/tasks").json()["results"][0]["preemptible"] is True


def test_a_preempted_event_is_in_the_trail(alice, client_for, make_task):
    task = make_task(alice, state=TaskState.RUNNING, preemptible=True)
    task.record(EventKind.PREEMPTED, actor="scheduler", message="Preempted.", data={"for_task": "x", "grace_s": 60})
    events = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/events").json()
    assert events[-1]["kind"] == "PREEMPTED" and events[-1]["data"] == {"for_task": "x", "grace_s": 60}


def test_spec_shows_raw_and_resolved(alice, client_for, make_task, shared_root):
    task = make_task(alice)
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/spec").json()
    assert body["raw"] == PPO_SPEC
    resolved = body["resolved"]
    assert resolved["train_file"] == str(shared_root / "datasets/gsm8k/train.parquet")
    assert resolved["argv"][:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    job_root = shared_root / "users/alice/jobs" / f"{task.task_id}--a01"
    assert resolved["job_root"] == str(job_root)
    # Checkpoints in the task's own folder, shared by its attempts: a retry resumes from them.
    checkpoints = shared_root / "users/alice/jobs" / task.task_id / "checkpoints"
    assert resolved["checkpoint_dir"] == str(checkpoints)
    assert f"trainer.default_local_dir={checkpoints}" in resolved["argv"]
    assert "trainer.resume_mode=auto" in resolved["argv"]


def test_events_are_the_trail(alice, client_for, make_task):
    task = make_task(alice)
    client = client_for(alice)
    client.post(f"/api/v2/tasks/{task.task_id}/cancel")
    events = client.get(f"/api/v2/tasks/{task.task_id}/events").json()
    assert [(e["kind"], e["to_state"]) for e in events] == [
        (EventKind.CREATED, "QUEUED"),
        (EventKind.STATE_TRANSITION, "CANCELED"),
    ]
    assert events[1]["actor"] == "api:alice"


# --- cancel --------------------------------------------------------------------------------


def test_cancel_of_a_queued_task_is_immediate(alice, client_for, make_task):
    task = make_task(alice)
    response = client_for(alice).post(f"/api/v2/tasks/{task.task_id}/cancel")
    assert response.status_code == 200
    assert response.json()["state"] == "CANCELED"


def test_cancel_of_a_running_task_is_accepted(alice, client_for, make_task):
    task = make_task(alice, state=TaskState.RUNNING)
    response = client_for(alice).post(f"/api/v2/tasks/{task.task_id}/cancel")
    assert response.status_code == 202
    assert response.json()["state"] == "RUNNING"
    assert response.json()["cancel_requested"] is True


@pytest.mark.parametrize("state", [TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELED])
def test_cancel_of_a_finished_task_conflicts(alice, client_for, make_task, state):
    task = make_task(alice, state=state)
    response = client_for(alice).post(f"/api/v2/tasks/{task.task_id}/cancel")
    assert response.status_code == 409
    assert _error(response)["code"] == "conflict"


def test_only_admins_requeue(alice, admin, client_for, make_task):
    task = make_task(alice, state=TaskState.FAILED)
    assert client_for(alice).post(f"/api/v2/tasks/{task.task_id}/requeue").status_code == 403
    response = client_for(admin).post(f"/api/v2/tasks/{task.task_id}/requeue")
    assert response.status_code == 200
    assert response.json()["state"] == "QUEUED"


@pytest.mark.parametrize("state", [TaskState.RUNNING, TaskState.SUBMITTED, TaskState.SUBMITTING, TaskState.SUCCEEDED])
def test_requeue_of_a_task_that_has_not_failed_or_been_canceled_conflicts(admin, alice, client_for, make_task, state):
    task = make_task(alice, state=state)
    response = client_for(admin).post(f"/api/v2/tasks/{task.task_id}/requeue")
    assert response.status_code == 409
    assert _error(response)["code"] == "conflict"
    assert "only FAILED or CANCELED" in _error(response)["message"]
    task.refresh_from_db()
    assert task.state == state


# --- the isolation matrix ------------------------------------------------------------------


def _client_as(kind: str, alice: User, bob: User, admin: User, client_for):
    if kind == "owner":
        return client_for(alice)
    if kind == "other":
        return client_for(bob)
    if kind == "admin":
        return client_for(admin)
    client = client_for(None)
    if kind == "bad_token":
        client.credentials(HTTP_AUTHORIZATION="Bearer argus_not-a-real-token")
    elif kind == "revoked":
        token, raw = ApiToken.issue(alice, "old")
        token.revoke()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    elif kind == "expired":
        _, raw = ApiToken.issue(alice, "old", expires_at=timezone.now() - timedelta(days=1))
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    elif kind == "disabled":
        client = client_for(alice)
        alice.is_active = False
        alice.save()
    return client


EXPECTED = {"owner": 200, "admin": 200, "other": 404}


@pytest.mark.parametrize("who", ["owner", "other", "admin", "no_token", "bad_token", "revoked", "expired", "disabled"])
@pytest.mark.parametrize(("method", "route"), TASK_ROUTES)
def test_isolation_matrix(alice, bob, admin, client_for, make_task, who, method, route):
    task = make_task(alice)
    client = _client_as(who, alice, bob, admin, client_for)
    response = getattr(client, method)(route.format(id=task.task_id))
    expected = EXPECTED.get(who, 401)
    assert response.status_code == expected, (who, route, response.content)
    if expected != 200:
        _error(response)
    task.refresh_from_db()
    if who not in ("owner", "admin"):
        assert task.state == TaskState.QUEUED  # nobody else could cancel it


@pytest.mark.parametrize("who", ["owner", "other", "admin", "no_token", "bad_token", "revoked", "disabled"])
def test_isolation_of_the_list(alice, bob, admin, client_for, make_task, who):
    task = make_task(alice)
    client = _client_as(who, alice, bob, admin, client_for)
    response = client.get("/api/v2/tasks")
    if who in ("no_token", "bad_token", "revoked", "disabled"):
        assert response.status_code == 401
        return
    ids = [row["task_id"] for row in response.json()["results"]]
    assert (task.task_id in ids) is (who != "other")


def test_unknown_task_is_404_in_the_error_shape(alice, client_for):
    response = client_for(alice).get("/api/v2/tasks/nope")
    assert response.status_code == 404
    assert _error(response)["code"] == "not_found"


# --- schema --------------------------------------------------------------------------------


def test_schema_documents_the_task_routes(alice, client_for):
    response = client_for(alice).get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    paths = schema["paths"]
    assert "/api/v2/tasks" in paths
    assert "/api/v2/tasks/{task_id}/cancel" in paths
    assert "application/yaml" in paths["/api/v2/tasks"]["post"]["requestBody"]["content"]


def test_swagger_ui_uses_local_assets(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn" not in html.lower()
    assert "/static/drf_spectacular_sidecar/" in html


def test_healthz(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok\n"


def test_it_rejects_a_request_over_the_gpu_limit(alice, client_for, datasets, settings):
    settings.ARGUS_MAX_TASK_GPUS = 2
    response = client_for(alice).post("/api/v2/tasks", PPO_SPEC, content_type="application/yaml")
    assert response.status_code == 400
    assert "limit is 2" in _error(response)["fields"]["nnodes"][0]


def test_an_unknown_api_route_answers_in_the_error_shape(alice, client_for):
    response = client_for(alice).get("/api/v2/nowhere/")
    assert response.status_code == 404
    assert _error(response)["code"] == "not_found"


def test_the_schema_generates_without_warnings():
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("spectacular", "--fail-on-warn", "--validate", stdout=out)
    assert "/api/v2/tasks/{task_id}/logs" in out.getvalue()
