"""The OpenAPI schema of the accounts routes says what they really answer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import include, path
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from accounts.models import ApiToken

TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),  # JSON has one number type: a step of 3 is a number too
    "boolean": bool,
    "object": dict,
    "array": list,
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator(patterns=[path("api/v2/", include("accounts.api.urls"))]).get_schema(public=True)


def conforms(value: Any, spec: dict[str, Any], schema: dict[str, Any], where: str = "$") -> None:
    """Check ``value`` against the OpenAPI 3.0 subset drf-spectacular writes for these routes."""
    if "$ref" in spec:
        spec = schema["components"]["schemas"][spec["$ref"].rsplit("/", 1)[1]]
    if "allOf" in spec:
        for part in spec["allOf"]:
            conforms(value, part, schema, where)
        return
    if value is None:
        assert spec.get("nullable"), f"{where} is null, which the schema does not allow"
        return
    if "enum" in spec:
        assert value in spec["enum"], f"{where}: {value!r} is not one of {spec['enum']}"
    if "type" in spec:
        assert isinstance(value, TYPES[spec["type"]]), f"{where}: {value!r} is not a {spec['type']}"
    if "properties" in spec:
        assert set(value) <= set(spec["properties"]), f"{where}: {set(value) - set(spec['properties'])} undocumented"
        assert set(spec.get("required", [])) <= set(value), f"{where}: missing {set(spec['required']) - set(value)}"
        for key, item in value.items():
            conforms(item, spec["properties"][key], schema, f"{where}.{key}")
    if "items" in spec:
        for index, item in enumerate(value):
            conforms(item, spec["items"], schema, f"{where}[{index}]")
    if "additionalProperties" in spec and isinstance(spec["additionalProperties"], dict):
        for key, item in value.items():
            conforms(item, spec["additionalProperties"], schema, f"{where}.{key}")


def documented(schema: dict[str, Any], method: str, template: str, status: int) -> dict[str, Any]:
    responses = schema["paths"][template][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {template} does not document {status}"
    return responses[str(status)]["content"]["application/json"]["schema"]


@pytest.fixture
def calls(admin, alice, bob, client_for) -> list[tuple[str, str, str, Any, Any]]:
    """(method, path template, path, body, client) for a success and a failure of each route."""
    admin_api, alice_api, anonymous = client_for(admin), client_for(alice), client_for(None)
    token, _ = ApiToken.issue(alice, "laptop", expires_at=timezone.now() + timedelta(days=1))
    ApiToken.issue(alice, "old")[0].revoke()
    bobs, _ = ApiToken.issue(bob, "bobs")
    return [
        ("get", "/api/v2/me", "/api/v2/me", None, alice_api),
        ("get", "/api/v2/me", "/api/v2/me", None, anonymous),
        ("get", "/api/v2/me/tokens", "/api/v2/me/tokens", None, alice_api),
        ("post", "/api/v2/me/tokens", "/api/v2/me/tokens", {"name": "x"}, alice_api),
        ("post", "/api/v2/me/tokens", "/api/v2/me/tokens", {"name": ""}, alice_api),
        ("delete", "/api/v2/me/tokens/{id}", f"/api/v2/me/tokens/{bobs.pk}", None, alice_api),
        ("get", "/api/v2/users", "/api/v2/users", None, admin_api),
        ("get", "/api/v2/users", "/api/v2/users", None, alice_api),
        ("post", "/api/v2/users", "/api/v2/users", {"username": "carol", "password": "long enough"}, admin_api),
        ("post", "/api/v2/users", "/api/v2/users", {"username": "../x", "password": "short"}, admin_api),
        ("get", "/api/v2/users/{username}", "/api/v2/users/alice", None, admin_api),
        ("get", "/api/v2/users/{username}", "/api/v2/users/nobody", None, admin_api),
        ("patch", "/api/v2/users/{username}", "/api/v2/users/bob", {"max_queued_tasks": 3}, admin_api),
        ("patch", "/api/v2/users/{username}", "/api/v2/users/bob", {"fair_share_weight": 0}, admin_api),
        ("patch", "/api/v2/users/{username}", "/api/v2/users/nobody", {}, admin_api),
        ("patch", "/api/v2/users/{username}", "/api/v2/users/bob", {}, alice_api),
        ("post", "/api/v2/users/{username}/disable", "/api/v2/users/bob/disable", None, admin_api),
        ("post", "/api/v2/users/{username}/disable", "/api/v2/users/admin/disable", None, admin_api),
        ("post", "/api/v2/users/{username}/enable", "/api/v2/users/bob/enable", None, admin_api),
        ("get", "/api/v2/users/{username}/tokens", "/api/v2/users/alice/tokens", None, admin_api),
        ("post", "/api/v2/users/{username}/tokens", "/api/v2/users/alice/tokens", {"name": "ci"}, admin_api),
        ("post", "/api/v2/users/{username}/tokens", "/api/v2/users/nobody/tokens", {"name": "ci"}, admin_api),
        ("delete", "/api/v2/users/{username}/tokens/{id}", f"/api/v2/users/bob/tokens/{token.pk}", None, admin_api),
    ]


def test_every_response_matches_the_schema(schema, calls):
    for method, template, url, body, client in calls:
        response = getattr(client, method)(url, body, format="json")
        assert response.status_code < 500, (method, url, response.content)
        spec = documented(schema, method, template, response.status_code)
        conforms(response.json(), spec, schema, f"{method.upper()} {url} {response.status_code}")


def test_a_revocation_documents_its_empty_answer(schema, alice, client_for):
    token, _ = ApiToken.issue(alice, "t")
    response = client_for(alice).delete(f"/api/v2/me/tokens/{token.pk}")
    assert response.status_code == 204
    assert "content" not in schema["paths"]["/api/v2/me/tokens/{id}"]["delete"]["responses"]["204"]
