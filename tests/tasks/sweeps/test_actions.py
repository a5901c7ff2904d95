"""Submitting a sweep (its trials created as ordinary tasks, the cap's waiting ones WAITING, the
submission's limits applied) and canceling one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from accounts.models import Secret, UserLimits
from tasks.choices import EventKind, TaskState
from tasks.models import Task
from tasks.specs.errors import SpecError
from tasks.submit import PriorityNotAllowed, QuotaError
from tasks.sweeps.actions import cancel_sweep, submit_sweep
from tasks.sweeps.models import Sweep
from tests.conftest import TRAIN, grant_high_priority

pytestmark = pytest.mark.django_db
S = TaskState

LR = "actor_rollout_ref.actor.optim.lr"
BATCH = "data.train_batch_size"
BASE = {"workload": "grpo", "model_id": "Qwen/Qwen2.5-0.5B-Instruct", **TRAIN, "test_freq": 5}
METRIC = "val-core/openai/gsm8k/acc/mean@1"


def document(**changes: Any) -> dict[str, Any]:
    sweep: dict[str, Any] = {
        "name": "lr-sweep",
        "base": BASE,
        "grid": {LR: [1.0e-6, 3.0e-6], BATCH: [256, 512]},
        "max_concurrent": 2,
        "early_stop": {"metric": METRIC, "mode": "max", "min_steps": 10, "eta": 2},
    }
    sweep.update(changes)
    return {key: value for key, value in sweep.items() if value is not ...}


def submit(user, **changes: Any) -> Sweep:
    return submit_sweep(user, yaml.safe_dump(document(**changes), sort_keys=False), actor=f"api:{user.username}")


def test_a_sweeps_trials_are_tasks_in_grid_order_the_first_max_concurrent_queued(alice, datasets: Path) -> None:
    sweep = submit(alice)
    assert re.fullmatch(r"alice-sweep-\d{8}-\d{6}-[0-9a-f]{4}", sweep.sweep_id)
    assert (sweep.name, sweep.max_concurrent, sweep.metric, sweep.mode) == ("lr-sweep", 2, METRIC, "max")
    assert sweep.early_stop == {"min_steps": 10, "eta": 2}
    assert yaml.safe_load(sweep.document) == document()
    trials = list(sweep.trials.order_by("trial_index"))
    assert [(t.trial_index, t.params, t.state) for t in trials] == [
        (0, {LR: 1.0e-6, BATCH: 256}, S.QUEUED),
        (1, {LR: 1.0e-6, BATCH: 512}, S.QUEUED),
        (2, {LR: 3.0e-6, BATCH: 256}, S.WAITING),
        (3, {LR: 3.0e-6, BATCH: 512}, S.WAITING),
    ]
    assert [t.pending_reason for t in trials] == ["", "", *["sweep lr-sweep: 2 of 2 trials running"] * 2]
    assert [t.queued_at is not None for t in trials] == [True, True, False, False]
    # Each an ordinary task: its own id, its own spec with the trial's overrides.
    assert len({t.task_id for t in trials}) == 4 and all(t.workload == "grpo" for t in trials)
    assert trials[3].resolved.overrides == (f"{LR}=3e-06", f"{BATCH}=512")
    assert yaml.safe_load(trials[3].spec_raw)["overrides"] == [f"{LR}=3e-06", f"{BATCH}=512"]


def test_each_trial_has_a_created_event_naming_the_sweep(alice, datasets: Path) -> None:
    sweep = submit(alice)
    for trial in sweep.trials.all():
        [event] = trial.events.filter(kind=EventKind.CREATED)
        assert event.to_state == trial.state and event.actor == "api:alice"
        assert event.data == {"sweep_id": sweep.sweep_id, "trial_index": trial.trial_index, "params": trial.params}
        assert f"sweep {sweep.sweep_id}" in event.message
    waiting = sweep.trials.get(trial_index=2).events.get(kind=EventKind.CREATED)
    assert "max_concurrent" in waiting.message and "2 of 2 trials running" in waiting.message


def test_without_a_cap_every_trial_is_queued(alice, datasets: Path) -> None:
    sweep = submit(alice, max_concurrent=...)
    assert sweep.max_concurrent is None
    assert set(sweep.trials.values_list("state", flat=True)) == {S.QUEUED}


def test_a_cap_above_the_trials_queues_them_all(alice, datasets: Path) -> None:
    sweep = submit(alice, max_concurrent=10)
    assert set(sweep.trials.values_list("state", flat=True)) == {S.QUEUED}


def test_a_sweep_without_a_name_is_named_by_its_id_in_the_reason(alice, datasets: Path) -> None:
    sweep = submit(alice, name=..., max_concurrent=1, early_stop=...)
    assert (sweep.name, sweep.metric, sweep.early_stop) == ("", "", {})
    assert sweep.trials.get(trial_index=1).pending_reason == f"sweep {sweep.sweep_id}: 1 of 1 trials running"


def test_random_trials_are_created_in_the_samples_order(alice, datasets: Path) -> None:
    space = {LR: {"loguniform": [1e-7, 1e-5]}}
    sweep = submit(alice, grid=..., random={"samples": 3, "seed": 7, "space": space})
    again = submit(alice, grid=..., random={"samples": 3, "seed": 7, "space": space})
    params = list(sweep.trials.order_by("trial_index").values_list("params", flat=True))
    assert params == list(again.trials.order_by("trial_index").values_list("params", flat=True))
    assert len(params) == 3 and len({p[LR] for p in params}) == 3


def test_every_trial_counts_toward_max_queued_tasks_and_nothing_is_created(alice, datasets: Path) -> None:
    UserLimits.objects.create(user=alice, max_queued_tasks=3)
    with pytest.raises(QuotaError, match="max_queued_tasks is 3"):
        submit(alice)
    assert (Sweep.objects.count(), Task.objects.count()) == (0, 0)


def test_a_secret_the_user_lacks_is_named_by_the_bases_key(alice, datasets: Path) -> None:
    Secret.put(alice, "HF_TOKEN", "hf-value-1234")
    with pytest.raises(SpecError) as caught:
        submit(alice, base={**BASE, "secrets": ["HF_TOKEN", "WANDB_API_KEY"]})
    assert list(caught.value.fields) == ["base.secrets"]
    [message] = caught.value.fields["base.secrets"]
    assert "WANDB_API_KEY" in message and message.endswith("(every trial)")
    assert (Sweep.objects.count(), Task.objects.count()) == (0, 0)


def test_a_trial_over_the_sites_gpu_limit_is_named_by_its_params(alice, datasets: Path, settings) -> None:
    settings.ARGUS_MAX_TASK_GPUS = 4
    with pytest.raises(SpecError) as caught:
        submit(alice, grid={"n_gpus_per_node": [4, 8]})
    too_many = "trial 1 (n_gpus_per_node=8): asks for 8 GPUs in all; the limit is 4 (ARGUS_MAX_TASK_GPUS)"
    # The swept key by its grid field; nnodes, which the limit names too, is the base's.
    assert caught.value.fields == {"base.nnodes": [too_many], "grid.n_gpus_per_node": [too_many]}
    assert Task.objects.count() == 0


def test_a_high_priority_sweep_needs_the_grant(alice, datasets: Path) -> None:
    with pytest.raises(PriorityNotAllowed):
        submit(alice, base={**BASE, "priority": "high"})
    assert (Sweep.objects.count(), Task.objects.count()) == (0, 0)
    grant_high_priority(alice)
    sweep = submit(alice, base={**BASE, "priority": "high"})
    assert set(sweep.trials.values_list("priority", flat=True)) == {"high"}


def test_a_document_refused_creates_nothing(alice, datasets: Path) -> None:
    with pytest.raises(SpecError):
        submit(alice, grid={LR: []})
    assert (Sweep.objects.count(), Task.objects.count()) == (0, 0)


def test_cancel_sets_canceled_at_and_cancels_every_trial_not_ended(alice, datasets: Path) -> None:
    sweep = submit(alice, grid={LR: [1e-6, 2e-6, 3e-6, 4e-6, 5e-6]}, max_concurrent=3)
    trials = {t.trial_index: t for t in sweep.trials.all()}
    Task.objects.filter(pk=trials[0].pk).update(state=S.SUCCEEDED)
    Task.objects.filter(pk=trials[1].pk).update(state=S.RUNNING)
    cancel_sweep(sweep, actor="api:alice")
    sweep.refresh_from_db()
    assert sweep.canceled_at is not None
    states = dict(sweep.trials.values_list("trial_index", "state"))
    assert states == {0: S.SUCCEEDED, 1: S.RUNNING, 2: S.CANCELED, 3: S.CANCELED, 4: S.CANCELED}
    running = Task.objects.get(pk=trials[1].pk)
    assert running.cancel_requested_at is not None  # stopped on Ray by the scheduler
    assert running.events.filter(kind=EventKind.CANCEL_REQUESTED, actor="api:alice").count() == 1
    assert not Task.objects.get(pk=trials[0].pk).events.exclude(kind=EventKind.CREATED).exists()
    # Again: nothing more happens (the cancel already asked for stays the one).
    first = sweep.canceled_at
    cancel_sweep(sweep, actor="api:alice")
    sweep.refresh_from_db()
    assert sweep.canceled_at == first
    assert running.events.filter(kind=EventKind.CANCEL_REQUESTED).count() == 1
