"""accounts/files.py's tree with the home as `/` (what SFTP shows), moves and pending uploads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from accounts import files

pytestmark = pytest.mark.django_db


def test_the_tree_puts_the_shared_areas_under_common(alice: User, alice_home: Path):
    assert files.locate_in_tree("alice", "/") == files.locate("alice", "")
    assert files.locate_in_tree("alice", "/common") == ("common",)
    assert files.locate_in_tree("alice", "common/") == ("common",)
    hf = files.locate_in_tree("alice", "/common/hf/models/x")
    assert isinstance(hf, files.Location) and (hf.area, hf.rel) == ("hf", "models/x")
    mine = files.locate_in_tree("alice", "/datasets/a.txt")
    assert isinstance(mine, files.Location) and (mine.area, mine.rel) == ("home", "datasets/a.txt")
    assert files.tree_children(()) == ["common"]
    assert files.tree_children(("common",)) == ["datasets", "hf"]
    with pytest.raises(files.NotFound, match="holds only the shared folders"):
        files.locate_in_tree("alice", "/common/other")
    with pytest.raises(files.ReadOnly, match="nothing can be added there"):
        files.locate_in_tree("alice", "/common/new.txt", new=True)
    with pytest.raises(files.InvalidPath, match=r"'\.\.' is not allowed"):
        files.locate_in_tree("alice", "/datasets/../../bob")


def test_a_pending_upload_appears_only_when_committed(alice: User, alice_home: Path):
    target = files.locate("alice", "datasets/big.bin", new=True)
    pending = files.begin_upload(target)
    pending.write(b"half")
    assert not target.path.exists()
    assert [entry.name for entry in files.list_folder(target.parent()).entries] == []  # the temporary is hidden
    pending.commit(overwrite=True)
    pending.discard()  # harmless after a commit
    assert target.path.read_bytes() == b"half" and os.stat(target.path).st_mode & 0o777 == 0o644
    assert os.listdir(target.path.parent) == ["big.bin"]
    cut = files.begin_upload(target)
    cut.write(b"other")
    cut.discard()
    assert target.path.read_bytes() == b"half" and os.listdir(target.path.parent) == ["big.bin"]


def test_a_pending_upload_never_replaces_a_folder_or_writes_outside_the_home(alice: User, alice_home: Path):
    with pytest.raises(files.AlreadyExists, match="is a folder"):
        files.begin_upload(files.locate("alice", "datasets", new=True))
    with pytest.raises(files.ReadOnly):
        files.begin_upload(files.locate("alice", "x.txt", "datasets", new=True))


def test_move_stays_in_the_home_and_keeps_the_home_folders(alice: User, alice_home: Path, shared_root: Path):
    (alice_home / "code" / "a.txt").write_text("a")
    files.move(files.locate("alice", "code/a.txt"), files.locate("alice", "datasets/b.txt", new=True))
    assert (alice_home / "datasets" / "b.txt").read_text() == "a" and not (alice_home / "code" / "a.txt").exists()
    (alice_home / "code" / "c.txt").write_text("c")
    with pytest.raises(files.AlreadyExists):
        files.move(files.locate("alice", "code/c.txt"), files.locate("alice", "datasets/b.txt", new=True))
    files.move(files.locate("alice", "code/c.txt"), files.locate("alice", "datasets/b.txt", new=True), overwrite=True)
    assert (alice_home / "datasets" / "b.txt").read_text() == "c"
    with pytest.raises(files.ReadOnly, match="part of every home"):
        files.move(files.locate("alice", "jobs"), files.locate("alice", "old-jobs", new=True))
    with pytest.raises(files.ReadOnly, match="read-only"):
        files.move(files.locate("alice", "datasets/b.txt"), files.locate("alice", "b.txt", "datasets", new=True))
    (alice_home / "shared").symlink_to(shared_root / "datasets")
    with pytest.raises(files.ReadOnly, match="link to a shared, read-only folder"):
        files.move(files.locate("alice", "datasets/b.txt"), files.locate("alice", "shared/b.txt", new=True))
    with pytest.raises(files.ReadOnly):
        files.check_changeable(files.locate("alice", "shared"))
    real = files.check_changeable(files.locate("alice", "datasets/b.txt"))
    assert real == alice_home.resolve() / "datasets" / "b.txt"


@pytest.mark.parametrize("name", ["bad\x01name", "line\nbreak", os.fsdecode(b"latin1-\xe9")])
def test_an_upload_or_a_move_gets_the_names_the_files_api_allows(alice: User, alice_home: Path, name: str):
    # SFTP names paths in bytes: a control character or bytes that are not UTF-8 (decoded as
    # surrogates) must be refused as the files API refuses them, not written to the storage.
    with pytest.raises(files.InvalidPath):
        files.begin_upload(files.locate("alice", f"code/{name}", new=True))
    (alice_home / "code" / "a.txt").write_text("a")
    with pytest.raises(files.InvalidPath):
        files.move(files.locate("alice", "code/a.txt"), files.locate("alice", f"code/{name}", new=True))
    assert sorted(os.listdir(alice_home / "code")) == ["a.txt"]
