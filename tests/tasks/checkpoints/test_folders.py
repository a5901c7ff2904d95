"""A checkpoint folder as verl writes it, read and pruned (tasks.checkpoints.folders)."""

from __future__ import annotations

from pathlib import Path

from tasks.checkpoints import folders
from tests.tasks.checkpoints.trees import MANIFEST, MEGATRON_FILES, PPO_FILES, saved, steps_in, track, write_step


def test_it_lists_the_steps_with_their_sizes_and_the_trackers_step(tmp_path: Path) -> None:
    saved(tmp_path, 10, 20)
    write_step(tmp_path, 30)  # being written: the tracker names 20
    found = folders.scan(tmp_path)
    assert found.steps() == [10, 20, 30]
    assert found.latest == 20
    files = sum(PPO_FILES.values())
    assert all(checkpoint.bytes >= files for checkpoint in found.checkpoints)
    assert found.at(20).bytes == folders.size_of(tmp_path / "global_step_20")
    assert folders.scan(tmp_path, sizes=False).at(20).bytes == 0


def test_no_step_is_complete_without_a_tracker_or_its_folder(tmp_path: Path) -> None:
    write_step(tmp_path, 1)
    assert folders.scan(tmp_path).latest is None
    track(tmp_path, 2)  # names a folder that is not there
    assert folders.scan(tmp_path).latest is None
    assert folders.scan(tmp_path / "missing").checkpoints == ()


def test_a_megatron_step_is_complete_once_its_manifest_is_written(tmp_path: Path) -> None:
    saved(tmp_path, 1, 2, files=MEGATRON_FILES)
    (tmp_path / "global_step_1" / MANIFEST).write_text("{}")
    assert folders.scan(tmp_path).latest is None  # the tracker names 2, whose manifest is missing
    (tmp_path / "global_step_2" / MANIFEST).write_text("{}")
    assert folders.scan(tmp_path).latest == 2


def test_a_deletion_renames_first_and_leftovers_are_removed_later(tmp_path: Path) -> None:
    saved(tmp_path, 1, 2)
    aside = folders.set_aside(folders.scan(tmp_path).at(1))
    assert steps_in(tmp_path) == [2] and aside.is_dir()  # verl no longer sees step 1
    folders.leftovers(tmp_path)
    assert not aside.exists() and steps_in(tmp_path) == [2]
