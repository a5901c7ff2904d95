"""What schemathesis found (issue 12, item 7), one test each: the schema and the code agree.

tests/test_schemathesis.py runs schemathesis itself; these pin each finding down, fast.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gunicorn.config  # type: ignore[import-untyped]
import jsonschema  # type: ignore[import-untyped]  # schemathesis brings it, without stubs
import pytest
import yaml
from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts.groups.models import QuotaGroup
from tasks.models import Task
from tasks.specs.rules import MAX_DEPENDENCIES
from tests.accounts.helpers import assert_error

pytestmark = pytest.mark.django_db

FILES = "/api/v2/files"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(public=True)


@pytest.fixture
def api(alice: User, client_for: Callable[[User | None], APIClient]) -> APIClient:
    return client_for(alice)


def operation(schema: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    return schema["paths"][path][method]


def parameter(schema: dict[str, Any], method: str, path: str, name: str) -> dict[str, Any]:
    return next(p for p in operation(schema, method, path)["parameters"] if p["name"] == name)


# --- The schema says what the routes answer ---------------------------------------------------------


def test_the_queue_is_documented_as_the_page_it_is(schema: dict[str, Any]) -> None:
    ref = operation(schema, "get", "/api/v2/queue")["responses"]["200"]["content"]["application/json"]["schema"]
    page = schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]
    assert {"count", "next", "previous", "results"} <= set(page["properties"])


@pytest.mark.parametrize("path", ["/api/v2/tasks", "/api/v2/queue", "/api/v2/me/tokens", "/api/v2/users"])
def test_paginated_lists_document_400_404_and_their_bounds(schema: dict[str, Any], path: str) -> None:
    assert {"400", "401", "404"} <= set(operation(schema, "get", path)["responses"])
    assert parameter(schema, "get", path, "page")["schema"]["minimum"] == 1
    size = parameter(schema, "get", path, "page_size")["schema"]
    assert (size["minimum"], size["maximum"]) == (1, 500)


def test_every_route_documents_401_and_events_404(schema: dict[str, Any]) -> None:
    for path, operations in schema["paths"].items():
        for method, spec in operations.items():
            assert "401" in spec["responses"], f"{method} {path}"
    assert "404" in operation(schema, "get", "/api/v2/tasks/{task_id}/events")["responses"]


def test_a_yaml_spec_is_documented_as_a_mapping_with_a_mapping_example(schema: dict[str, Any]) -> None:
    content = operation(schema, "post", "/api/v2/tasks")["requestBody"]["content"]["application/yaml"]
    component = schema["components"]["schemas"][content["schema"]["$ref"].rsplit("/", 1)[1]]
    # nnodes and n_gpus_per_node are required but for an export: the parser says so, not the schema.
    assert component["type"] == "object" and {"workload"} <= set(component["required"])
    assert isinstance(next(iter(content["examples"].values()))["value"], dict)


def test_the_user_filter_says_it_takes_no_nul(schema: dict[str, Any], api: APIClient) -> None:
    assert parameter(schema, "get", "/api/v2/tasks", "user")["schema"]["pattern"] == "^[^\\x00]*$"
    assert_error(api.get("/api/v2/tasks", {"user": "a\x00b"}), 400, fields=("user",))


def test_downloads_are_documented_and_sent_as_octet_stream(
    schema: dict[str, Any], api: APIClient, alice_home: Path
) -> None:
    assert (
        "application/octet-stream" in operation(schema, "get", "/api/v2/files/download")["responses"]["200"]["content"]
    )
    (alice_home / "datasets" / "page.html").write_text("<script>alert(1)</script>")
    response = api.get(f"{FILES}/download", {"path": "datasets/page.html"})
    assert response.status_code == 200 and response["Content-Type"] == "application/octet-stream"


# --- The code holds requests to the schema ----------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("page=0", "page"),
        ("page=-1", "page"),
        ("page=1.0", "page"),
        ("page=last", "page"),
        ("page_size=null", "page_size"),
        ("page_size=0", "page_size"),
        ("page_size=501", "page_size"),
    ],
)
def test_a_bad_page_or_page_size_is_a_400(api: APIClient, query: str, field: str) -> None:
    for path in ("/api/v2/tasks", "/api/v2/queue", "/api/v2/me/tokens"):
        assert_error(api.get(f"{path}?{query}"), 400, fields=(field,))


def test_a_page_past_the_last_is_a_404_and_a_bad_filter_a_400(api: APIClient) -> None:
    assert_error(api.get("/api/v2/tasks?page=2"), 404)
    assert_error(api.get("/api/v2/tasks?workload=AAA"), 400, fields=("workload",))
    assert api.get("/api/v2/tasks?page=1&page_size=500").status_code == 200


def test_unknown_ids_on_events_are_404(api: APIClient) -> None:
    assert_error(api.get("/api/v2/tasks/nobody-ppo-1/events"), 404)


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", f"{FILES}?area="),
        ("get", f"{FILES}/download?path="),
        ("get", f"{FILES}/download?path=datasets/x&area="),
        ("delete", f"{FILES}?path="),
        ("post", f"{FILES}/mkdir?path="),
        ("get", "/api/v2/tasks/x/logs?attempt="),
    ],
)
def test_blank_values_the_schema_forbids_are_a_400(api: APIClient, method: str, url: str) -> None:
    response = getattr(api, method)(url)
    assert response.status_code == 400, response.content


@pytest.mark.parametrize("value", ["yes", "on", "T", "TRUE", "2", ""])
def test_switches_take_only_true_false_1_or_0(api: APIClient, alice_home: Path, value: str) -> None:
    upload = {"file": SimpleUploadedFile("a.txt", b"x")}
    assert_error(api.post(f"{FILES}?path=datasets&overwrite={value}", upload, format="multipart"), 400)
    body: dict[str, object] = {"file": SimpleUploadedFile("a.txt", b"x"), "overwrite": value}
    assert_error(api.post(f"{FILES}?path=datasets", body, format="multipart"), 400)
    assert_error(api.delete(f"{FILES}?path=datasets/none&recursive={value}"), 400)


def test_switches_still_take_the_documented_spellings(api: APIClient, alice_home: Path) -> None:
    for value in ("true", "1", "false", "0"):
        body = {"file": SimpleUploadedFile("a.txt", value.encode())}
        response = api.post(f"{FILES}?path=datasets&overwrite={value}", body, format="multipart")
        assert response.status_code in (201, 409), response.content


@pytest.mark.parametrize("path", ["/x", "../x", "a/../b", "a\x00b"])
def test_paths_the_pattern_forbids_are_a_400(api: APIClient, path: str) -> None:
    assert_error(api.get(f"{FILES}/download", {"path": path}), 400, fields=("path",))


def test_a_file_or_folder_of_the_wrong_kind_is_a_409(api: APIClient, alice_home: Path) -> None:
    (alice_home / "datasets" / "f.txt").write_text("x")
    assert_error(api.get(FILES, {"path": "datasets/f.txt"}), 409, "not a folder")
    assert_error(api.get(f"{FILES}/download", {"path": "datasets"}), 409, "folder")
    assert_error(api.delete(f"{FILES}?path=."), 403, "top folder")


@pytest.mark.parametrize("expires_at", ["", "null", "tomorrow", 5])
def test_a_token_expiry_must_be_a_date_time_or_null(api: APIClient, expires_at: Any) -> None:
    assert_error(api.post("/api/v2/me/tokens", {"name": "x", "expires_at": expires_at}, format="json"), 400)
    assert api.post("/api/v2/me/tokens", {"name": "x", "expires_at": None}, format="json").status_code == 201


def test_json_routes_take_json_only(api: APIClient) -> None:
    # A form would read `expires_at=` as null; the schema documents application/json alone.
    response = api.post("/api/v2/me/tokens", {"name": "x", "expires_at": ""}, format="multipart")
    assert_error(response, 415)


def test_a_yaml_mapping_as_the_schemas_example_is_accepted(
    api: APIClient, datasets: Path, schema: dict[str, Any]
) -> None:
    content = operation(schema, "post", "/api/v2/tasks")["requestBody"]["content"]["application/yaml"]
    example = next(iter(content["examples"].values()))["value"]
    response = api.post("/api/v2/tasks", yaml.safe_dump(example), content_type="application/yaml")
    assert response.status_code == 201, response.content
    assert Task.objects.count() == 1


# --- A generated client can use every operation (issue 26, item 10) --------------------------------


def subschemas(node: Any) -> Any:
    """Every schema object in ``node`` (an operation, a component), however deeply nested."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from subschemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from subschemas(value)


def test_every_default_is_one_of_its_enum(schema: dict[str, Any]) -> None:
    # A query switch declared as the strings true/false/1/0 with the boolean default false:
    # openapi-python-client refused the operations that had one (logs, upload, delete).
    checked = 0
    for node in subschemas(schema):
        if "enum" in node and "default" in node:
            assert node["default"] in node["enum"], node
            checked += 1
    assert checked >= 4


@pytest.mark.parametrize("key", ["after", "after_any"])
def test_a_specs_dependencies_are_documented_as_task_ids(schema: dict[str, Any], key: str) -> None:
    # They carried the secret-name pattern and its cap of 32: `after: [alice-ppo-1]` failed the schema.
    prop = schema["components"]["schemas"]["SpecDocumentRequest"]["properties"][key]
    ids = [f"alice-ppo-{n}" for n in range(1, MAX_DEPENDENCIES + 1)]
    jsonschema.validate(ids, prop)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([*ids, "alice-ppo-0"], prop)
    secrets = schema["components"]["schemas"]["SpecDocumentRequest"]["properties"]["secrets"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(["alice-ppo-1"], secrets)


@pytest.mark.parametrize(
    ("path", "document"),
    [("/api/v2/tasks", "SpecDocumentRequest"), ("/api/v2/pipelines", "PipelineDocumentRequest")],
)
def test_a_json_body_is_documented_as_the_yaml_text_or_the_document(
    schema: dict[str, Any], path: str, document: str
) -> None:
    # Only {"spec": "<yaml>"} was: a generated client had no model for the document sent as JSON.
    ref = operation(schema, "post", path)["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    choices = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["oneOf"]
    assert [choice["$ref"].rsplit("/", 1)[1] for choice in choices] == ["SpecSubmissionRequest", document]


def test_the_example_spec_sent_as_json_is_accepted(api: APIClient, datasets: Path, schema: dict[str, Any]) -> None:
    content = operation(schema, "post", "/api/v2/tasks")["requestBody"]["content"]["application/yaml"]
    example = next(iter(content["examples"].values()))["value"]
    response = api.post("/api/v2/tasks", example, format="json")
    assert response.status_code == 201, response.content


def test_every_json_route_answers_and_documents_413(
    admin: User, client_for: Callable[[User | None], APIClient], schema: dict[str, Any]
) -> None:
    # It was documented on three routes only; every one that reads a JSON body can answer it.
    api = client_for(admin)
    QuotaGroup.objects.create(name="nlp", nominal_gpus=8)  # a group to change
    body = '{"name": "' + "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + '"}'
    routes = [
        (method, path)
        for path, operations in schema["paths"].items()
        for method, spec in operations.items()
        if "application/json" in spec.get("requestBody", {}).get("content", {})
    ]
    assert len(routes) >= 9
    for method, path in routes:
        url = path.replace("{username}", "admin").replace("{name}", "nlp")
        response = getattr(api, method)(url, body, content_type="application/json")
        assert_error(response, 413)
        assert "413" in operation(schema, method, path)["responses"], f"{method} {path}"


def test_no_value_matches_two_branches_of_a_oneof(schema: dict[str, Any]) -> None:
    # The files `path` was oneOf [a pattern that takes "", maxLength 0]: its default "" matched both.
    for method, path in [("get", FILES), ("post", FILES), ("get", "/api/v2/files/download")]:
        spec = parameter(schema, method, path, "path")["schema"]
        assert "oneOf" not in spec and spec["maxLength"] == 4096
    assert parameter(schema, "get", FILES, "path")["schema"]["default"] == ""
    for node in subschemas(schema):
        if "oneOf" in node and node["oneOf"][-1] == {"type": "string", "maxLength": 0}:
            assert not re.search(node["oneOf"][0].get("pattern", "."), ""), node


def test_operations_have_readable_ids_and_a_tag_per_concept(schema: dict[str, Any]) -> None:
    # They were generated (`v2_tasks_cancel_create`) and all tagged `v2`.
    operations = [spec for operations in schema["paths"].values() for spec in operations.values()]
    ids = [spec["operationId"] for spec in operations]
    assert len(set(ids)) == len(ids)
    assert {"tasks_create", "tasks_get", "tasks_cancel", "tasks_logs", "me_tokens_delete", "users_update"} <= set(ids)
    assert not [name for name in ids if name.startswith("v2_") or name.endswith(("_retrieve", "_destroy"))]
    tags = {tag for spec in operations for tag in spec["tags"]}
    concepts = {"tasks", "pipelines", "queue", "cluster", "admission", "files", "me", "tokens", "secrets", "webhooks"}
    assert tags == concepts | {"users", "groups", "usage", "ssh-keys", "sweeps"}
    assert {"me_ssh_keys_list", "me_ssh_keys_create", "me_ssh_keys_delete"} <= set(ids)
    assert {"groups_list", "groups_create", "groups_get", "groups_update", "groups_delete"} <= set(ids)
    assert operation(schema, "delete", "/api/v2/groups/{name}")["tags"] == ["groups"]
    assert operation(schema, "post", "/api/v2/tasks/{task_id}/cancel")["tags"] == ["tasks"]
    assert operation(schema, "delete", "/api/v2/me/tokens/{id}")["tags"] == ["tokens"]


def test_no_two_components_are_the_same_schema(schema: dict[str, Any]) -> None:
    # The files routes had FileError and FileErrorDetail, the very shape of Error and ErrorBody.
    components = schema["components"]["schemas"]
    seen: dict[str, str] = {}
    for name, spec in components.items():
        key = json.dumps(spec, sort_keys=True)
        assert key not in seen, f"{name} repeats {seen.get(key)}"
        seen[key] = name
    ref = operation(schema, "delete", FILES)["responses"]["409"]["content"]["application/json"]["schema"]
    assert ref == {"$ref": "#/components/schemas/Error"}


def test_a_query_string_too_long_for_gunicorn_is_documented_as_its_414(schema: dict[str, Any]) -> None:
    # A 4,096-character path the schema allows makes a request line over gunicorn's limit, which
    # gunicorn answers 414 (text/html) before Argus sees the request: undocumented, it was a finding.
    limit = gunicorn.config.Config().limit_request_line
    longest = parameter(schema, "get", "/api/v2/files/download", "path")["schema"]["maxLength"]
    assert len(f"GET /api/v2/files/download?path={'a' * longest} HTTP/1.1") > limit
    for method, path in [("get", FILES), ("post", FILES), ("delete", FILES), ("get", "/api/v2/tasks")]:
        assert "text/html" in operation(schema, method, path)["responses"]["414"]["content"], f"{method} {path}"
    assert "414" not in operation(schema, "get", "/api/v2/queue")["responses"]  # integers only


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/v2/me/tokens", {"name": 5}, "name"),
        ("/api/v2/users/alice/tokens", {"name": 5}, "name"),
        ("/api/v2/users", {"username": 5, "password": "long enough"}, "username"),
        ("/api/v2/users", {"username": "carol", "password": 12345678901}, "password"),
        ("/api/v2/users", {"username": "carol", "is_admin": "yes"}, "is_admin"),
    ],
)
def test_a_json_field_of_the_wrong_type_is_a_400(
    admin: User, alice: User, client_for: Callable[[User | None], APIClient], url: str, body: Any, field: str
) -> None:
    # DRF's own fields took 5 as the name "5" where the schema says a string.
    assert_error(client_for(admin).post(url, body, format="json"), 400, fields=(field,))


@pytest.mark.parametrize("query", ["tail=5.0", "attempt=1.0", "tail=%205", "attempt=1e0", "tail=%D9%A5"])
def test_a_query_integer_takes_digits_only(
    api: APIClient, alice: User, make_task: Callable[..., Task], query: str
) -> None:
    # DRF's IntegerField took `5.0` as 5 where the schema says an integer (as `page` already refuses).
    task = make_task(alice)
    field = query.split("=")[0]
    assert_error(api.get(f"/api/v2/tasks/{task.task_id}/logs?{query}"), 400, fields=(field,))
    if field == "attempt":
        assert_error(api.get(f"/api/v2/tasks/{task.task_id}/metrics?{query}"), 400, fields=(field,))
    assert api.get(f"/api/v2/tasks/{task.task_id}/logs?tail=5").status_code == 200  # digits still do
    assert_error(api.get(f"/api/v2/tasks/{task.task_id}/logs?attempt=1"), 404, "has no attempt 1")
