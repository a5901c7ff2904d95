from __future__ import annotations

import os
from pathlib import Path

import pytest

from tasks.specs.paths import (
    PathPolicyError,
    allowed_read_roots,
    expand_macros,
    is_hub_id,
    other_user_home,
    resolve_input_path,
)


@pytest.fixture
def train_file(shared_root: Path) -> Path:
    path = shared_root / "datasets" / "gsm8k" / "train.parquet"
    path.parent.mkdir()
    path.write_bytes(b"PAR1")
    return path


def test_it_expands_common_macros_before_home(shared_root: Path) -> None:
    text = "$HOME/common/datasets/a ${HOME}/common/hf/b $HOME/code/c ${HOME}/d"
    assert expand_macros(text, "alice") == (
        f"{shared_root}/datasets/a {shared_root}/hf/b {shared_root}/users/alice/code/c {shared_root}/users/alice/d"
    )


def test_it_expands_bare_macros(shared_root: Path) -> None:
    assert expand_macros("$HOME", "alice") == f"{shared_root}/users/alice"
    assert expand_macros("$HOME/common/datasets", "alice") == f"{shared_root}/datasets"


def test_it_leaves_lookalike_names_alone(shared_root: Path) -> None:
    assert expand_macros("$HOMEDIR/x", "alice") == "$HOMEDIR/x"
    # Not one of the two shared folders: it stays inside the user's own home.
    expanded = expand_macros("$HOME/common/datasets2/x", "alice")
    assert expanded == f"{shared_root}/users/alice/common/datasets2/x"


def test_it_lists_the_allowed_read_roots(shared_root: Path) -> None:
    assert allowed_read_roots("alice") == [
        shared_root / "users" / "alice",
        shared_root / "datasets",
        shared_root / "hf",
        shared_root / "common",
    ]


@pytest.mark.parametrize("value", ["Qwen/Qwen2.5-0.5B-Instruct", "meta-llama/Llama-3.1-8B", "a_b/c.d"])
def test_it_recognises_hub_ids(value: str) -> None:
    assert is_hub_id(value)


@pytest.mark.parametrize(
    "value", ["/hf/Qwen/x", "$HOME/models/x", "~/models", "gpt2", "a/b/c", "../x", "a/..", "./a", "a/b c"]
)
def test_it_does_not_take_paths_for_hub_ids(value: str) -> None:
    assert not is_hub_id(value)


def test_it_accepts_a_shared_dataset(alice, train_file: Path) -> None:
    assert resolve_input_path(str(train_file), "alice") == train_file


def test_it_accepts_macro_paths(alice, train_file: Path, shared_root: Path) -> None:
    assert resolve_input_path("$HOME/common/datasets/gsm8k/train.parquet", "alice") == train_file
    own = shared_root / "users" / "alice" / "datasets" / "mine.parquet"
    own.write_bytes(b"PAR1")
    assert resolve_input_path("${HOME}/datasets/mine.parquet", "alice") == own


def test_it_accepts_the_older_common_layout(alice, shared_root: Path) -> None:
    path = shared_root / "common" / "datasets" / "old.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PAR1")
    assert resolve_input_path(str(path), "alice") == path


def test_it_normalises_repeated_slashes_and_dots(alice, train_file: Path, shared_root: Path) -> None:
    assert resolve_input_path(f"{shared_root}//datasets/./gsm8k/train.parquet", "alice") == train_file


def test_it_rejects_another_users_home(alice, bob, shared_root: Path) -> None:
    secret = shared_root / "users" / "bob" / "datasets" / "secret.parquet"
    secret.write_bytes(b"PAR1")
    with pytest.raises(PathPolicyError, match="another user's home"):
        resolve_input_path(str(secret), "alice")


def test_it_rejects_the_users_directory_itself(alice, shared_root: Path) -> None:
    with pytest.raises(PathPolicyError, match="another user's home"):
        resolve_input_path(str(shared_root / "users"), "alice")


def test_it_rejects_dot_dot_escapes(alice, bob) -> None:
    with pytest.raises(PathPolicyError, match=r"contains '\.\.'"):
        resolve_input_path("$HOME/../bob/datasets", "alice")
    with pytest.raises(PathPolicyError, match=r"contains '\.\.'"):
        resolve_input_path("$HOME/common/datasets/../users/bob", "alice")


def test_it_rejects_a_symlink_into_another_home(alice, bob, shared_root: Path) -> None:
    secret = shared_root / "users" / "bob" / "datasets" / "secret.parquet"
    secret.write_bytes(b"PAR1")
    link = shared_root / "users" / "alice" / "datasets" / "innocent.parquet"
    link.symlink_to(secret)
    with pytest.raises(PathPolicyError, match="another user's home"):
        resolve_input_path("$HOME/datasets/innocent.parquet", "alice")


def test_it_rejects_a_symlinked_directory_out_of_the_roots(alice, shared_root: Path) -> None:
    (shared_root / "users" / "alice" / "datasets" / "etc").symlink_to("/etc")
    with pytest.raises(PathPolicyError, match="through a symlink"):
        resolve_input_path("$HOME/datasets/etc/passwd", "alice")


def test_it_rejects_paths_outside_the_roots(alice, shared_root: Path) -> None:
    with pytest.raises(PathPolicyError, match="outside the allowed directories"):
        resolve_input_path("/etc/passwd", "alice")
    (shared_root / "ray").mkdir()
    with pytest.raises(PathPolicyError, match="outside the allowed directories"):
        resolve_input_path(str(shared_root / "ray"), "alice")


def test_it_rejects_missing_files(alice) -> None:
    with pytest.raises(PathPolicyError, match="does not exist"):
        resolve_input_path("$HOME/datasets/nothing.parquet", "alice")


@pytest.mark.parametrize("value", ["datasets/train.parquet", "~/train.parquet", "./train.parquet"])
def test_it_rejects_relative_paths(alice, value: str) -> None:
    with pytest.raises(PathPolicyError, match="not an absolute path"):
        resolve_input_path(value, "alice")


@pytest.mark.parametrize("name", ["a,b.parquet", "a b.parquet", "${oc.env:X}", "a'b"])
def test_it_rejects_characters_hydra_would_misread(alice, shared_root: Path, name: str) -> None:
    with pytest.raises(PathPolicyError, match="misread"):
        resolve_input_path(f"{shared_root}/datasets/{name}", "alice")


def test_it_narrows_the_roots_when_asked(alice, train_file: Path, shared_root: Path) -> None:
    code = shared_root / "users" / "alice" / "code"
    with pytest.raises(PathPolicyError, match="outside the allowed directories"):
        resolve_input_path(str(train_file), "alice", within=[code])
    (code / "reward.py").write_text("def compute_score(**kw): return 0\n")
    assert resolve_input_path("$HOME/code/reward.py", "alice", within=[code]) == code / "reward.py"


@pytest.mark.parametrize("username", ["..", ".", "a/b", ""])
def test_it_refuses_usernames_that_are_not_one_directory(username: str) -> None:
    with pytest.raises(PathPolicyError):
        expand_macros("$HOME/x", username)


def test_it_sees_another_home_through_a_symlinked_root(alice, bob, shared_root: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(shared_root)
    assert other_user_home(f"{alias}/users/bob/datasets", "alice")
    assert not other_user_home(f"{alias}/users/alice/datasets", "alice")
    assert other_user_home(f"{shared_root}/users/alice2", "alice")
    assert not other_user_home(f"{shared_root}/datasets", "alice")
    assert os.path.realpath(alias) == os.path.realpath(shared_root)
