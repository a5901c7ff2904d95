"""The size of a task of several verl resource pools in `argus ls`, `queue` and `show`: every pool
(the trainer's first, unnamed), as the task API's ``pools`` gives them, and verl's CPU actors."""

from __future__ import annotations

FULLY_ASYNC = (
    "kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: 4\n"
    "command: python3 -m verl.experimental.fully_async_policy.fully_async_main trainer.nnodes=1"
    " trainer.n_gpus_per_node=4 rollout.nnodes=2 rollout.n_gpus_per_node=2\n"
)


def test_every_pool_is_shown_where_the_size_is(alice, argus_as, make_task):
    task = make_task(alice, spec=FULLY_ASYNC)
    basic = make_task(alice)
    argus = argus_as(alice)

    listed = argus.run("ls")
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if task.task_id in line]
    assert " 1x4 + rollout 2x2 " in row
    (row,) = [line for line in listed.stdout.splitlines() if basic.task_id in line]
    assert " 1x4 " in row and "rollout" not in row

    queued = argus.run("queue")
    assert queued.returncode == 0, queued.stderr
    (row,) = [line for line in queued.stdout.splitlines() if task.task_id in line]
    assert " 1x4 + rollout 2x2 " in row

    shown = argus.run("show", task.task_id).stdout.splitlines()
    assert "gpus        1x4 + rollout 2x2 = 8" in shown
    cpus = "FullyAsyncTaskRunner 1 + FullyAsyncTrainer 10 + FullyAsyncRollouter 10 + MessageQueue 2 CPUs"
    assert f"cpu actors  {cpus}" in shown
    assert not any(line.startswith("cpu actors") for line in argus.run("show", basic.task_id).stdout.splitlines())
