"""Checkpoint folders shaped as verl 0.9.1 writes them, for the tests of tasks.checkpoints."""

from __future__ import annotations

from pathlib import Path

from tasks.specs.paths import TRACKER_FILE

# RayPPOTrainer._save_checkpoint: the actor's FSDP shards in actor/ (FSDPCheckpointManager), then
# data.pt beside it, then the tracker.
PPO_FILES = {
    "actor/model_world_size_1_rank_0.pt": 4000,
    "actor/optim_world_size_1_rank_0.pt": 8000,
    "actor/extra_state_world_size_1_rank_0.pt": 100,
    "actor/fsdp_config.json": 40,
    "actor/huggingface/config.json": 60,
    "data.pt": 10,
}
# MegatronCheckpointManager (layout v2) in actor/: model/, optimizer/, extra/, the manifest last.
MEGATRON_FILES = {
    "actor/model/dist_ckpt/__0_0.distcp": 4000,
    "actor/optimizer/dist_ckpt/__0_0.distcp": 8000,
    "actor/extra/dist_ckpt/__0_0.distcp": 100,
    "data.pt": 10,
}
MANIFEST = "actor/ckpt_contents.json"


def write_step(folder: Path, step: int, files: dict[str, int] = PPO_FILES) -> Path:
    """global_step_<step> with ``files`` (name -> bytes); the tracker untouched."""
    step_folder = folder / f"global_step_{step}"
    for name, size in files.items():
        path = step_folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    return step_folder


def track(folder: Path, step: int) -> None:
    """verl's tracker, written last: step ``step`` is complete."""
    (folder / TRACKER_FILE).write_text(str(step))


def saved(folder: Path, *steps: int, files: dict[str, int] = PPO_FILES) -> None:
    """Each step saved in turn, the tracker naming the last."""
    for step in steps:
        write_step(folder, step, files)
        track(folder, step)


def steps_in(folder: Path) -> list[int]:
    return sorted(int(p.name.removeprefix("global_step_")) for p in folder.glob("global_step_*"))
