"""Ray's token authentication: one token per cluster, in a private file on shared storage.

Ray (≥ 2.52) started with ``RAY_AUTH_MODE=token`` refuses every client without its token: the
dashboard and the Jobs API answer 401 without ``Authorization: Bearer <token>`` (403 with a
wrong one), the GCS refuses gRPC calls without it. Without it anyone who reaches the dashboard
reads every job's runtime_env, the secrets of Argus's users included (RAY_NOTES.md).

The token lives beside head.json (``ray_token``, or ARGUS_RAY_TOKEN_FILE), mode 0600: the head
creates it once when it is absent (``ensure_token``), or an operator does (``manage.py raynode
token``); every node's Ray reads it through ``RAY_AUTH_TOKEN_PATH`` (``ray_env``); Argus's own
Ray client reads it and sends it (tasks.scheduler.rayjobs). A file readable by anyone but its
owner is refused by all of them: the token would no longer be a secret.

Like the discovery reader, this module imports neither Django nor any process management: the
scheduler uses it from the web side, ``raynode`` from a bare image.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from raypool.discovery import fsync_dir, head_file_from_settings

TOKEN_FILE_NAME = "ray_token"
# ARGUS_RAY_AUTH: "token" (the default) starts every node with Ray's token authentication,
# "off" without (a cluster on a network only the service reaches).
AUTH_MODES = ("token", "off")
# Ray's own variables (ray/_private/authentication, the C++ AuthenticationTokenLoader): the mode,
# then the token itself, else a file holding it. The token wins over the file when both are set.
RAY_AUTH_MODE = "RAY_AUTH_MODE"
RAY_AUTH_TOKEN = "RAY_AUTH_TOKEN"
RAY_AUTH_TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"
# Ray's tokens are 64 hex characters; an operator's may be longer, never this long.
MAX_TOKEN_BYTES = 4096
# What can travel in an HTTP header and a gRPC metadata value: printable ASCII, no spaces.
TOKEN_SHAPE = re.compile(r"[!-~]+")


class TokenError(ValueError):
    """The token file is there but cannot be used: unreadable, malformed, or open to others."""


def bearer(token: str) -> dict[str, str]:
    """The HTTP header Ray's dashboard and Jobs API take the token in."""
    return {"Authorization": f"Bearer {token}"}


def token_path_beside(head_file: Path) -> Path:
    """The default place of a cluster's token: beside its head.json, so that whoever agrees on
    where the head file is (head, workers, scheduler) agrees on the token too."""
    return head_file.with_name(TOKEN_FILE_NAME)


def token_file_from_settings() -> Path:
    """The token file the Django side reads: ARGUS_RAY_TOKEN_FILE if set, else beside the head
    file (raypool.discovery.head_file_from_settings)."""
    from django.conf import settings  # here, not at the top: raynode images import this module bare

    override = str(getattr(settings, "ARGUS_RAY_TOKEN_FILE", "") or "").strip()
    return Path(override) if override else token_path_beside(head_file_from_settings())


def read_token(path: str | os.PathLike[str]) -> str | None:
    """The token in ``path``; None when there is no such file. Raises TokenError when the file
    is there but unusable: a token readable by others is no secret, and a bad one would only be
    refused by Ray later, with a less helpful message."""
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            raw = f.read(MAX_TOKEN_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise TokenError(f"cannot read the Ray token file {path}: {error.strerror}") from None
    if mode & 0o077:
        raise TokenError(
            f"the Ray token file {path} is open to other users (mode {stat.S_IMODE(mode):04o}): chmod 600 {path}"
        )
    token = raw.decode("ascii", errors="replace").strip()
    if len(raw) > MAX_TOKEN_BYTES or not TOKEN_SHAPE.fullmatch(token):
        raise TokenError(f"the Ray token file {path} does not hold a token (one line of printable ASCII)")
    return token


def new_token() -> str:
    # As `ray get-auth-token --generate` makes them (256 bits).
    from secrets import token_hex

    return token_hex(32)


def ensure_token(path: str | os.PathLike[str]) -> bool:
    """Create the token file unless it exists; True when this call created it.

    Once, atomically: the token is written to a private temp file beside the target and
    hard-linked into place, which fails when another head (or an operator) got there first;
    theirs then stands. A reader never sees a half-written token, and two heads never each
    believe their own."""
    target = Path(path)
    if read_token(target) is not None:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp creates the file with mode 0600, whatever the umask.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new_token() + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp_name, target)
        except FileExistsError:
            return False
    finally:
        Path(tmp_name).unlink(missing_ok=True)
    fsync_dir(target.parent)
    return True


def ray_env(base: Mapping[str, str], mode: str, token_file: Path) -> dict[str, str]:
    """``base`` with what `ray start` needs for ``mode``. Always explicit: with RAY_AUTH_MODE
    unset, Ray ≥ 2.59 turns tokens on by itself for a head whose user has ~/.ray/auth_token.
    A RAY_AUTH_TOKEN from the environment would win over the cluster's file: dropped."""
    env = {name: value for name, value in base.items() if name not in (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH)}
    if mode == "token":
        env.update({RAY_AUTH_MODE: "token", RAY_AUTH_TOKEN_PATH: str(token_file)})
    else:
        env[RAY_AUTH_MODE] = "disabled"
    return env


def use_in_process(token: str) -> None:
    """Make Ray's own clients in this process send ``token``.

    The HTTP clients take it as a header (tasks.scheduler.rayjobs passes it), but Ray's GCS
    client (``get_cluster_status``) reads it only from Ray's process-wide configuration: the
    variables, then Ray's config re-read, as ``ray start`` does itself. The token, not its
    file's path: the GCS client aborts the whole process if that file is missing when it looks.
    A token sent to a cluster without authentication is ignored, so this never hurts."""
    if os.environ.get(RAY_AUTH_MODE) == "token" and os.environ.get(RAY_AUTH_TOKEN) == token:
        return
    # Ray's compiled module: its .pyi stub leaves these two out.
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    os.environ[RAY_AUTH_MODE] = "token"
    os.environ[RAY_AUTH_TOKEN] = token
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
