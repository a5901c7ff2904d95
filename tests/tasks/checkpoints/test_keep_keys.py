"""The spec keys keep_checkpoints and keep_best: what they take, and a 400 naming the field."""

from __future__ import annotations

import pytest
import yaml

from tasks.specs.parse import parse_spec
from tests.conftest import PPO_SPEC

pytestmark = pytest.mark.django_db

ADVANCED = (
    "kind: advanced\nworkload: sft\nnnodes: 1\nn_gpus_per_node: 1\n"
    "command: python3 -m verl.trainer.sft_trainer_ray trainer.nnodes=1 trainer.n_gpus_per_node=1\n"
)


def test_basic_and_advanced_specs_take_them_with_the_sites_default(alice, datasets, settings) -> None:
    settings.ARGUS_KEEP_CHECKPOINTS = 5
    assert parse_spec(PPO_SPEC, username="alice").resolved.keep_checkpoints == 5
    parsed = parse_spec(ADVANCED + "keep_checkpoints: 0\nkeep_best: {metric: val/loss, mode: min}\n", username="alice")
    assert (parsed.resolved.keep_checkpoints, parsed.resolved.keep_best) == (0, {"metric": "val/loss", "mode": "min"})


def test_a_negative_site_default_keeps_all(alice, datasets, settings) -> None:
    """ARGUS_KEEP_CHECKPOINTS=-1 reached specs unchecked (a default is not the spec's value): the
    pass then kept up_to[1:], deleting every older step one a pass, and verl was told -1 (found
    in review). Below 0 it keeps all, as 0."""
    settings.ARGUS_KEEP_CHECKPOINTS = -1
    assert parse_spec(PPO_SPEC, username="alice").resolved.keep_checkpoints == 0


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ({"metric": "val/loss", "mode": "lowest"}, "keep_best.mode", "must be max or min, not 'lowest'"),
        ({"mode": "max"}, "keep_best.metric", "not missing"),
        ({"metric": "val loss", "mode": "max"}, "keep_best.metric", "must be the name of a metric"),
        ({"metric": "val/loss", "mode": "max", "every": 2}, "keep_best", "takes only metric and mode, not every"),
        ("val/loss", "keep_best", "must be a mapping"),
    ],
)
def test_a_wrong_keep_best_is_a_400_naming_its_field(alice, client_for, datasets, value, field, words) -> None:
    spec = PPO_SPEC + yaml.safe_dump({"keep_best": value})
    response = client_for(alice).post("/api/v2/tasks", spec, content_type="application/yaml")
    assert response.status_code == 400, response.content
    fields = response.json()["error"]["fields"]
    assert any(words in message for message in fields[field]), fields


def test_keep_checkpoints_is_a_count(alice, client_for, datasets) -> None:
    spec = PPO_SPEC + "keep_checkpoints: -1\n"
    response = client_for(alice).post("/api/v2/tasks", spec, content_type="application/yaml")
    assert response.status_code == 400
    assert "keep_checkpoints" in response.json()["error"]["fields"]
