"""Which files a task may read: the `$HOME` macros and the allowed read roots (SPEC §3).

A task reads from its owner's home `<root>/users/<user>`, the shared `<root>/datasets` and
`<root>/hf`, and the older `<root>/common/…` layout — never from another user's home. Every check
is made twice: on the path as written (normalised, without touching the disk) and on its real
path with every symlink resolved, so neither `..` nor a symlink planted in a home can lead out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from accounts.homes import home_dir, shared_root, users_root


class PathPolicyError(ValueError):
    """A path a task may not use; the message says why, in words for the user."""


# `$HOME` or `${HOME}`, but not `$HOMEDIR`: the macro is the whole variable name.
_HOME = r"(?:\$HOME(?![A-Za-z0-9_])|\$\{HOME\})"
# The two shared folders the data service shows inside every home (seed 003 §2.3.1). They map to
# the shared roots, not to the user's own home, so they are expanded first; `$HOME/common/hf2` is
# no such folder and falls through to the plain `$HOME` rule.
_COMMON = re.compile(_HOME + r"/common/(datasets|hf)(?![A-Za-z0-9_.-])")
_HOME_RE = re.compile(_HOME)
# The task's checkpoint folder, shared by its attempts (tasks.jobfiles.checkpoint_dir). The task
# id is not known while a spec is checked: Argus writes the folder in when it builds the command,
# so bash never expands it (a quoted `$ARGUS_CHECKPOINT_DIR` would otherwise reach verl as a
# relative path, resolved against the job's working directory).
CHECKPOINT_MACRO = re.compile(r"\$ARGUS_CHECKPOINT_DIR(?![A-Za-z0-9_])|\$\{ARGUS_CHECKPOINT_DIR\}")

# What the Hub accepts as a repo id: `org/name`, letters, digits, `-`, `_`, `.`.
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
# Characters a basic spec's path may hold. The builders pass paths as Hydra override values, where
# `,` starts a sweep, quotes and brackets change the type, and `${…}` is an OmegaConf
# interpolation that could read the worker's environment: such paths are refused rather than
# quoted, since no dataset or model needs them.
_SAFE_PATH = re.compile(r"[\w./@+-]+")


def _safe_username(username: str) -> str:
    # Django allows `.` in usernames; a user called `..` would otherwise own the whole root.
    if not username or username in (".", "..") or "/" in username or "\0" in username:
        raise PathPolicyError(f"{username!r} cannot own a home directory")
    return username


def expand_macros(text: str, username: str) -> str:
    """Expand `$HOME/common/datasets`, `$HOME/common/hf`, then `$HOME` (also `${HOME}`), in that order."""
    root = shared_root()
    home = str(home_dir(_safe_username(username)))
    # Callables, not replacement strings: a root path holding `\` must not be read as a group escape.
    text = _COMMON.sub(lambda m: str(root / m.group(1)), text)
    return _HOME_RE.sub(lambda m: home, text)


def expand_checkpoint_macro(text: str, checkpoint_dir: Path) -> str:
    """Write the task's checkpoint folder in for `$ARGUS_CHECKPOINT_DIR` / `${ARGUS_CHECKPOINT_DIR}`."""
    return CHECKPOINT_MACRO.sub(lambda m: str(checkpoint_dir), text)


def allowed_read_roots(username: str) -> list[Path]:
    """Directories a task of ``username`` may read from, as configured (not resolved)."""
    root = shared_root()
    return [home_dir(_safe_username(username)), root / "datasets", root / "hf", root / "common"]


def is_hub_id(value: str) -> bool:
    """True for `org/name` model ids such as `Qwen/Qwen2.5-0.5B-Instruct`; a path never is one."""
    # The pattern already refuses a leading `/`, `$` or `~`; `..` would make `a/..` look like an id.
    return ".." not in value and _HUB_ID.fullmatch(value) is not None


def normalise(path: str) -> str:
    """`path` with repeated slashes and `.` components removed; `..` is left for the caller to refuse.

    Done by hand because `os.path.normpath` keeps a leading `//`, which POSIX leaves
    implementation-defined but Linux treats as `/`.
    """
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


def has_parent_reference(path: str) -> bool:
    return ".." in path.split("/")


def _within(path: str | Path, root: str | Path) -> bool:
    path, root = str(path), str(root).rstrip("/")
    return path == root or path.startswith(root + "/")


def other_user_home(path: str, username: str) -> bool:
    """True when ``path`` (absolute, normalised) lies in a home that is not ``username``'s.

    `<root>/users` itself counts: listing it reveals every user. The real path is checked too,
    so a symlink into another home, or a spelling of the root through a symlinked parent, is caught.
    """
    users = users_root()
    own = users / _safe_username(username)
    for candidate, users_dir, own_home in (
        (path, users, own),
        (os.path.realpath(path), users.resolve(), own.resolve()),
    ):
        if _within(candidate, users_dir) and not _within(candidate, own_home):
            return True
    return False


def resolve_input_path(
    value: str,
    username: str,
    *,
    within: Sequence[Path] | None = None,
    must_exist: bool = True,
    pending: Sequence[Path] = (),
) -> Path:
    """Check a path a task will read and return it, macros expanded and normalised.

    ``within`` narrows the allowed roots (custom reward files must be under `$HOME/code`);
    by default they are :func:`allowed_read_roots`. Steps:

    1. expand the macros; the result must be absolute and free of `..` and odd characters;
    2. as written, it must lie under an allowed root and not in another user's home;
    3. its real path (symlinks resolved) must lie under the real path of an allowed root;
    4. it must exist (unless not ``must_exist``: a folder a run reads only if it is there; or it
       lies in a ``pending`` folder: an earlier pipeline step's output, checked again when the
       step that reads it becomes QUEUED).

    The path as written is returned, not the real one, so a shared root mounted through a
    symlink keeps the name users know. Raises PathPolicyError.
    """
    path = _absolute(value, username, "read")
    roots = list(within) if within is not None else allowed_read_roots(username)
    shown = ", ".join(str(r) for r in roots)
    if not any(_within(path, r) for r in roots):
        raise PathPolicyError(f"{value!r} is outside the allowed directories ({shown})")
    real = os.path.realpath(path)
    if not any(_within(real, r.resolve()) for r in roots):
        raise PathPolicyError(f"{value!r} leads outside the allowed directories through a symlink")
    if must_exist and not any(_within(path, folder) for folder in pending) and not os.path.exists(real):
        raise PathPolicyError(f"{value!r} does not exist")
    return Path(path)


def resolve_output_path(value: str, username: str) -> Path:
    """Check a folder a task will write to: it must lie inside its owner's `$HOME/jobs/`.

    The same steps as :func:`resolve_input_path`, with the jobs folder as the only root (and
    not the folder itself: each run writes into a folder of its own), and no need to exist yet.
    """
    path = _absolute(value, username, "written")
    jobs = home_dir(_safe_username(username)) / "jobs"
    if not (_within(path, jobs) and path != normalise(str(jobs))):
        raise PathPolicyError(f"{value!r} is not inside your jobs folder: write outputs under $HOME/jobs/<name>")
    if not _within(os.path.realpath(path), jobs.resolve()):
        raise PathPolicyError(f"{value!r} leads outside your jobs folder through a symlink")
    return Path(path)


def _absolute(value: str, username: str, use: str) -> str:
    """Steps 1 and 2 of the checks: macros expanded, absolute, no `..`, no odd characters,
    not in another user's home; returns the path normalised."""
    expanded = expand_macros(value.strip(), username)
    if not expanded:
        raise PathPolicyError("is empty")
    if not expanded.startswith("/"):
        raise PathPolicyError(
            f"{value!r} is not an absolute path: start it with / or $HOME "
            f"(a relative or ~ path would be {use} on the worker, not in your Argus home)"
        )
    if has_parent_reference(expanded):
        raise PathPolicyError(f"{value!r} contains '..'")
    if not _SAFE_PATH.fullmatch(expanded):
        raise PathPolicyError(
            f"{value!r} contains characters verl's command line would misread (allowed: letters, digits, . _ - + @ /)"
        )
    path = normalise(expanded)
    if other_user_home(path, username):
        raise PathPolicyError(f"{value!r} is in another user's home")
    return path


# verl's checkpoint tracker (verl/utils/checkpoint/checkpoint_manager.py): the last saved step N,
# whose files are in global_step_N beside it; written last, by rename.
TRACKER_FILE = "latest_checkpointed_iteration.txt"


class NoCheckpoint(ValueError):
    """A checkpoints folder without a usable checkpoint; the message says why."""


def latest_checkpoint(folder: Path) -> Path:
    """verl's last checkpoint in ``folder``: global_step_N, N read from its tracker file."""
    try:
        step = (folder / TRACKER_FILE).read_text().strip()
    except OSError as error:
        raise NoCheckpoint(f"it left no checkpoint ({TRACKER_FILE} in {folder}: {error.strerror})") from error
    found = folder / f"global_step_{step}"
    if not step.isdigit() or not found.is_dir():
        raise NoCheckpoint(f"its {TRACKER_FILE} names {step[:20]!r}, and {found} is not a folder")
    return found
