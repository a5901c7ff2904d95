"""A run's total steps, one reading (Task.total_steps) for the metrics API, the CLI's bar and the
incomplete-run check: verl's own logged count first, else what the spec asks for."""

from __future__ import annotations

import pytest

from tests.cli.test_follow import ADVANCED_SPEC as ADVANCED  # its Hydra override asks for 4 steps
from tests.conftest import PPO_SPEC

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("spec", "logged", "total"),
    [
        (PPO_SPEC + "total_training_steps: 9\n", None, 9),
        (PPO_SPEC + "total_training_steps: 9\n", 12, 12),  # verl's count wins (it may cap the spec's)
        (PPO_SPEC, None, None),
        (ADVANCED, None, 4),
        (ADVANCED, 7, 7),
        (ADVANCED.replace(" trainer.total_training_steps=4", ""), None, None),
    ],
    ids=["basic", "basic-logged", "basic-none", "advanced", "advanced-logged", "advanced-none"],
)
def test_the_total_is_verls_count_else_the_specs(alice, make_task, spec, logged, total) -> None:
    assert make_task(alice, spec).total_steps(logged) == total


def test_the_metrics_api_reads_an_advanced_commands_total(alice, client_for, make_task) -> None:
    task = make_task(alice, ADVANCED)
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/metrics").json()
    assert body["total_steps"] == 4
