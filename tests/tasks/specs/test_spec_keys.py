"""The spec's keys are declared once (tasks.specs.keys.SPEC_KEYS): the parser, the schema, the task's
fields and the new-task page agree because they are built from it. These tests hold each one to
what the parser actually does, so a key added around the table shows up here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from django.utils.html import escape
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts.homes import home_dir
from tasks.models import Task
from tasks.specs.checks import COMMON, Duration
from tasks.specs.errors import SpecError
from tasks.specs.keys import SPEC_KEYS
from tasks.specs.parse import parse_spec
from tasks.specs.resolved import ResolvedSpec

pytestmark = pytest.mark.django_db

BASIC = {
    "workload": "ppo",
    "nnodes": 1,
    "n_gpus_per_node": 2,
    "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
    "train_file": "$HOME/common/datasets/gsm8k/train.parquet",
    "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
}
ADVANCED = {
    "kind": "advanced",
    "workload": "ppo",
    "nnodes": 1,
    "n_gpus_per_node": 2,
    "command": "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=2",
}
# A basic spec of another workload: export takes keys of its own, and none of training's.
EXPORT = {"workload": "export", "checkpoint": "$HOME/jobs/t/checkpoints/global_step_1"}


@pytest.fixture(scope="module")
def spec_document() -> dict[str, Any]:
    schema = SchemaGenerator().get_schema(public=True)
    body = schema["paths"]["/api/v2/tasks"]["post"]["requestBody"]["content"]["application/yaml"]["schema"]
    return schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]


def accepted_keys(spec: dict[str, Any]) -> list[str]:
    """The keys the parser accepts beside ``spec``, as it lists them to a user who sent an unknown one."""
    with pytest.raises(SpecError) as caught:
        parse_spec({**spec, "zzzzzzzzzzzz": 1}, username="alice")
    [message] = caught.value.fields["zzzzzzzzzzzz"]
    return message.split("; allowed: ")[1].split(", ")


@pytest.mark.parametrize("spec", [BASIC, ADVANCED, EXPORT], ids=["basic", "advanced", "export"])
def test_every_key_the_parser_accepts_is_in_the_schema(spec: dict[str, Any], spec_document: dict[str, Any]) -> None:
    accepted = accepted_keys(spec)
    assert {"preemptible", "time_limit", "stall_timeout"} <= set(accepted)
    missing = set(accepted) - set(spec_document["properties"])
    assert not missing, f"the parser accepts {sorted(missing)}, which the OpenAPI schema (SpecDocument) lacks"


def test_the_schema_holds_no_key_the_parser_refuses(spec_document: dict[str, Any]) -> None:
    accepted = set(accepted_keys(BASIC)) | set(accepted_keys(ADVANCED)) | set(accepted_keys(EXPORT))
    assert set(spec_document["properties"]) == accepted


def test_the_schema_says_each_keys_type_limits_and_whether_it_is_required(spec_document: dict[str, Any]) -> None:
    properties = spec_document["properties"]
    assert set(spec_document["required"]) == {k.name for k in SPEC_KEYS if k.required and k.kind == COMMON}
    for key in SPEC_KEYS:
        prop = properties[key.name]
        assert key.help in prop["description"], key.name
        assert prop.get("nullable", False) is (key.name not in spec_document["required"]), key.name
        if key.value_type is int and key.choices is None:
            assert (prop["type"], prop["minimum"], prop["maximum"]) == ("integer", key.low, key.high), key.name
        elif key.value_type is bool:
            assert prop["type"] == "boolean", key.name
        elif key.value_type is list:
            assert prop["type"] == "array", key.name
            if key.choices is not None:  # an enum, or a reference to one
                assert prop["items"].get("enum") == key.choices.values or "$ref" in prop["items"], key.name
        elif key.value_type is Duration:
            assert {"type": "integer", "minimum": key.low, "maximum": key.high} in prop["oneOf"], key.name
            assert any(form["type"] == "string" for form in prop["oneOf"]), key.name


@pytest.mark.parametrize("key", SPEC_KEYS, ids=lambda key: key.name)
def test_every_key_has_help(key: Any) -> None:
    assert key.help.strip() and key.help.endswith("."), key.name


def test_the_keys_fields_are_the_tasks() -> None:
    task_fields = {field.name for field in Task._meta.get_fields()}
    stored = {key.field for key in SPEC_KEYS if key.field}
    assert stored <= task_fields


# The attribute type each declared type resolves to (a duration: seconds).
RESOLVED_TYPES = {
    str: "str",
    int: "int",
    bool: "bool",
    Duration: "int",
    list: "tuple[str, ...]",
    dict: "dict[str, str]",
}


def test_the_resolved_spec_has_one_attribute_per_key_in_the_tables_order() -> None:
    assert [field.name for field in dataclasses.fields(ResolvedSpec)] == [key.name for key in SPEC_KEYS]


@pytest.mark.parametrize("key", SPEC_KEYS, ids=lambda key: key.name)
def test_each_resolved_attribute_has_its_keys_type(key: Any) -> None:
    """A key every spec takes is always set; one of a kind or workload only is None in the others
    (a list: empty)."""
    [field] = [field for field in dataclasses.fields(ResolvedSpec) if field.name == key.name]
    expected = RESOLVED_TYPES[key.value_type]
    if (key.kind != COMMON or key.workloads) and key.value_type is not list:
        expected += " | None"
    assert field.type == expected


def test_the_resolved_spec_is_frozen(datasets: Path, alice: User) -> None:
    resolved = parse_spec(BASIC, username="alice").resolved
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.nnodes = 8  # type: ignore[misc]


def test_the_stored_spec_reads_back_as_the_same_value(datasets: Path, alice: User) -> None:
    (home_dir("alice") / "jobs/t/checkpoints/global_step_1").mkdir(parents=True)
    for spec in (BASIC, ADVANCED, EXPORT):
        resolved = parse_spec(spec, username="alice").resolved
        assert ResolvedSpec.from_json(resolved.to_json()) == resolved


def test_the_resolved_spec_holds_every_key_of_its_kind(datasets: Path, alice: User) -> None:
    assert list(parse_spec(BASIC, username="alice").resolved.to_json()) == accepted_keys(BASIC)
    assert list(parse_spec(ADVANCED, username="alice").resolved.to_json()) == accepted_keys(ADVANCED)
    (home_dir("alice") / "jobs/t/checkpoints/global_step_1").mkdir(parents=True)
    assert list(parse_spec(EXPORT, username="alice").resolved.to_json()) == accepted_keys(EXPORT)


def test_a_task_gets_each_keys_field_from_the_table(
    datasets: Path, alice: User, client_for: Callable[[User | None], APIClient]
) -> None:
    spec = {**BASIC, "preemptible": True, "time_limit": "90m", "stall_timeout": 0, "max_retries": 2}
    response = client_for(alice).post("/api/v2/tasks", yaml.safe_dump(spec), content_type="application/yaml")
    assert response.status_code == 201, response.content
    task = Task.objects.get()
    assert (task.preemptible, task.time_limit_s, task.stall_timeout_s, task.max_retries) == (True, 5400, None, 2)
    assert (task.kind, task.workload, task.nnodes, task.n_gpus_per_node) == ("basic", "ppo", 1, 2)
    assert task.spec["time_limit"] == 5400 and yaml.safe_load(task.spec_raw) == spec


def test_the_new_task_page_lists_every_key_with_its_help_and_default(
    client: Client, alice: User, settings: Any
) -> None:
    settings.ARGUS_STALL_TIMEOUT_S = 1800
    client.force_login(alice)
    page = client.get("/tasks/new/").content.decode()
    for key in SPEC_KEYS:
        assert f"<dt><code>{key.name}</code>" in page and escape(key.help) in page, key.name
    assert "Default: <code>30 min</code>" in page  # stall_timeout: the site's, read at render time
    assert "Default: <code>20</code>" in page  # save_freq
