"""A task's checkpoint folder as verl 0.9.1 writes it, read and pruned.

verl's trainers write ``global_step_N/`` (PPO/GRPO: the actor's shards in ``actor/``, the critic's
beside it, ``data.pt``; SFT: the shards in the folder itself) and then the tracker
``latest_checkpointed_iteration.txt`` naming N (tasks.specs.paths.TRACKER_FILE): with FSDP the
tracker is the sign that step N is complete. Megatron's checkpoint manager writes its
``ckpt_contents.json`` manifest last into the folder it saves (``actor/`` or the step's own,
verl/utils/checkpoint/megatron_checkpoint_manager.py), so a Megatron step is complete only once
that is there too. A folder newer than the tracker's step is being written.

A deletion first renames the folder out of verl's names (``.deleting-global_step_N``, one call,
whatever its size), then removes it: a removal that outlives its bounded call finishes in its
thread, and what is left under that name is removed by a later pass; verl never sees half a step.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from tasks.specs.paths import TRACKER_FILE

STEP_FOLDER = re.compile(r"^global_step_(\d+)$")
MANIFEST = "ckpt_contents.json"
# Megatron's layout (schema v2): model/, optimizer/ and extra/ beside the manifest.
MEGATRON_PARTS = ("model", "optimizer")
DELETING = ".deleting-"


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path
    bytes: int


@dataclass(frozen=True)
class Folder:
    """A checkpoint folder as it is now: its steps (oldest first) and the newest complete one
    (None: none is, or the tracker cannot be trusted; nothing may be deleted then)."""

    checkpoints: tuple[Checkpoint, ...]
    latest: int | None

    def steps(self) -> list[int]:
        return [checkpoint.step for checkpoint in self.checkpoints]

    def at(self, step: int) -> Checkpoint:
        return next(checkpoint for checkpoint in self.checkpoints if checkpoint.step == step)


def size_of(path: Path, *, alone: bool = False) -> int:
    """Bytes under ``path``, links not followed (a link's own size). ``alone``: only what deleting
    ``path`` frees, not a file with another hard link (a retried pipeline step's checkpoint is
    its old task's, linked file by file: tasks.pipelines.retry)."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            try:
                found = os.lstat(os.path.join(root, name))
            except FileNotFoundError:  # deleted meanwhile (verl prunes its own)
                continue
            if not (alone and found.st_nlink > 1 and not stat.S_ISDIR(found.st_mode)):
                total += found.st_size
    return total


def _parts(step_folder: Path) -> list[Path]:
    """Where a step's shards are: each role's folder (actor/, critic/) for PPO, else the step's own."""
    roles = [child for child in (step_folder / "actor", step_folder / "critic") if child.is_dir()]
    return roles or [step_folder]


def _megatron(part: Path) -> bool:
    return (part / MANIFEST).exists() or any((part / name).is_dir() for name in MEGATRON_PARTS)


def complete(step_folder: Path) -> bool:
    """Whether a step the tracker names is whole: each Megatron part has its manifest."""
    if not step_folder.is_dir():
        return False
    return all((part / MANIFEST).is_file() for part in _parts(step_folder) if _megatron(part))


def tracker_step(folder: Path) -> int | None:
    try:
        text = (folder / TRACKER_FILE).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def scan(folder: Path, *, sizes: bool = True) -> Folder:
    """The steps in ``folder`` with their sizes (0 unless ``sizes``), and its newest complete step."""
    found: list[Checkpoint] = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return Folder((), None)
    for entry in entries:
        match = STEP_FOLDER.match(entry.name)
        if match and entry.is_dir(follow_symlinks=False):
            path = Path(entry.path)
            found.append(Checkpoint(int(match.group(1)), path, size_of(path) if sizes else 0))
    found.sort(key=lambda checkpoint: checkpoint.step)
    step = tracker_step(folder)
    latest = step if step is not None and complete(folder / f"global_step_{step}") else None
    return Folder(tuple(found), latest)


def set_aside(checkpoint: Checkpoint) -> Path:
    """Rename a step out of verl's names (one call, whatever its size); ``remove`` then deletes it."""
    aside = checkpoint.path.with_name(DELETING + checkpoint.path.name)
    os.replace(checkpoint.path, aside)
    return aside


def remove(path: Path) -> None:
    shutil.rmtree(path)


def leftovers(folder: Path) -> None:
    """Remove what earlier deletions left under their temporary names."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name.startswith(DELETING) and entry.is_dir(follow_symlinks=False):
            with contextlib.suppress(OSError):  # refused again (permission): the next pass tries again
                remove(Path(entry.path))
