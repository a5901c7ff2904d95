"""verl 0.9's resource pools on a real Ray cluster (head + 2 workers x 4 declared GPUs): a
separate_async task's trainer and rollout pools are admitted together and both placed; pools
that do not fit at once wait, with no attempt, instead of failing verl's check again and again."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.standin import standin_spec
from tasks.choices import TaskState
from tasks.models import Task
from tests.scheduler.conftest import state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState


def separate_async(gpus: int, *, steps: int, step_s: float = 0.3) -> str:
    """The stand-in's main_ppo in verl 0.9's separate_async mode: a trainer pool of 1 x ``gpus``
    and a rollout pool of 1 x 1 (one replica: tensor parallel 1)."""
    return (
        "kind: advanced\nworkload: ppo\nnnodes: 1\n"
        f"n_gpus_per_node: {gpus}\n"
        f"command: python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node={gpus}"
        " trainer.v1.trainer_mode=separate_async actor_rollout_ref.rollout.nnodes=1"
        " actor_rollout_ref.rollout.n_gpus_per_node=1 actor_rollout_ref.rollout.tensor_model_parallel_size=1"
        f" +standin.steps={steps} +standin.step_s={step_s}\n"
    )


def placed_gpus(task: Task) -> int:
    attempt = task.attempts.get()
    return sum(int(gpus) for gpus in attempt.nodes.values())


def test_a_separate_async_task_gets_both_pools_and_succeeds(alice, submit, on_ray):
    task = submit(alice, separate_async(1, steps=8))
    assert task.total_gpus == 2
    # Ray's own placement, read back while it runs: the trainer's group and the rollout's.
    tick_until(lambda: state_of(task) == S.RUNNING and placed_gpus(task) == 2)
    tick_until(lambda: state_of(task) == S.SUCCEEDED)
    attempt = task.attempts.get()
    assert attempt.gpus == 2 and attempt.failure_kind == ""
    log = Path(attempt.log_path).read_text()
    assert "Total available GPUs" not in log
    assert "step:8 - " in log


def test_pools_that_do_not_fit_at_once_wait_without_an_attempt(alice, bob, submit, on_ray, client_for):
    blocker = submit(bob, standin_spec(gpus=4, steps=400, step_s=0.3))
    tick_until(lambda: state_of(blocker) == S.RUNNING)
    # The trainer's 4 GPUs are free on the other worker; the rollout's one GPU is nowhere beside
    # them. Admitting the trainer's pool alone would fail verl's check (INSUFFICIENT_RESOURCES)
    # on every retry.
    pair = submit(alice, separate_async(4, steps=3))
    reason = "its rollout pool needs 1 node with 1 free GPU; 0 nodes have them now beside its trainer pool"
    tick_until(lambda: state_of(pair) == S.PENDING_RESOURCES, timeout=10)
    for _ in range(3):
        tick_until(lambda: True)
        pair.refresh_from_db()
        assert (pair.state, pair.pending_reason, pair.attempts.count()) == (S.PENDING_RESOURCES, reason, 0)

    assert client_for(bob).post(f"/api/v2/tasks/{blocker.task_id}/cancel").status_code == 202
    tick_until(lambda: state_of(pair) == S.SUCCEEDED, timeout=120)
    assert pair.attempts.count() == 1
    assert pair.attempts.get().failure_kind == ""
