"""Specs that run the stand-in trainer (tests/standin: verl 0.9.1's entry points, shortened) on a
real Ray cluster, for the tests on Ray and the benches."""

from __future__ import annotations


def standin_spec(nnodes: int = 1, gpus: int = 4, *, steps: int = 3, step_s: float = 0.2, extra: str = "") -> str:
    """An advanced spec running the stand-in trainer (tests/standin) with these knobs."""
    return (
        "kind: advanced\nworkload: ppo\n"
        f"nnodes: {nnodes}\nn_gpus_per_node: {gpus}\n"
        f"command: python3 -m verl.trainer.main_ppo trainer.nnodes={nnodes} trainer.n_gpus_per_node={gpus}"
        f" +standin.steps={steps} +standin.step_s={step_s} {extra}\n"
    )
