"""The file area: a user's home and the shared, read-only ``datasets`` and ``hf`` folders.

The data page and the files API both go through these functions, so they make the same checks:

1. A path is relative to its area's top folder. An absolute path, a ``..`` part or a NUL byte
   is refused before anything touches the disk.
2. Symlinks are resolved and the real path must stay inside what the user may read: their own
   home and the two shared folders (a ``$HOME/datasets/gsm8k`` link to the shared copy is a
   normal thing to have). A link into another user's home, or anywhere else, is refused.
3. Only the user's own home is writable, and only where the real path is inside it. A write
   never follows a symlink in its last part: an upload replaces the link, a delete removes it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from accounts.diskusage.quota import user_quota_refusal
from accounts.homes import HOME_SUBDIRS, ensure_home, home_dir, shared_root

HOME = "home"
SHARED_AREAS = ("datasets", "hf")
AREAS = (HOME, *SHARED_AREAS)
AREA_LABELS = {HOME: "My home", "datasets": "Shared datasets", "hf": "Hugging Face cache"}
# The macro each area is written with in a task spec (SPEC.md §3).
SPEC_PREFIXES = {HOME: "$HOME", "datasets": "$HOME/common/datasets", "hf": "$HOME/common/hf"}

# A listing stops here: the shared HF cache can hold folders far larger than a page can show.
MAX_LISTING = 1000
MAX_NAME_BYTES = 255
MAX_PATH_CHARS = 4096
# What split_path accepts, for the API schema: no leading `/`, no `..` part, no NUL (`.` and
# empty parts are allowed and ignored). A part other than `..` is a part not starting with a
# dot, a dot and more that is not a dot, or two dots and more.
_PART = r"(?:[^/\x00.][^/\x00]*|\.(?:[^/\x00.][^/\x00]*)?|\.\.[^/\x00]+)"
PATH_PATTERN = rf"^(?:{_PART}(?:/{_PART}?)*)?$"
UPLOAD_TEMP_PREFIX = ".argus-upload-"


class FileAreaError(Exception):
    """Something the user asked for cannot be done; ``field`` names the input at fault."""

    code = "invalid"

    def __init__(self, message: str, field: str = "path") -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidPath(FileAreaError):
    code = "invalid_path"


class WrongType(FileAreaError):
    """A file where a folder is needed, or the reverse: the path is fine, what is there is not."""

    code = "wrong_type"


class NotFound(FileAreaError):
    code = "not_found"


class ReadOnly(FileAreaError):
    code = "read_only"


class AlreadyExists(FileAreaError):
    code = "exists"


class NotEmpty(FileAreaError):
    code = "not_empty"


class TooLarge(FileAreaError):
    code = "too_large"


class AccessDenied(FileAreaError):
    """The storage itself refuses (a file written by a job as another user, say)."""

    code = "access_denied"


class NoSpace(FileAreaError):
    code = "no_space"


class DiskQuotaExceeded(FileAreaError):
    """The user, or their group, is at or over a disk quota (accounts.diskusage.quota)."""

    code = "disk_quota_exceeded"


@dataclass(frozen=True)
class Location:
    """A path the user named, checked: ``path`` is the real parent folder plus the last part.

    The last part is left unresolved on purpose: reads follow it (``real()``), writes act on
    the link itself.
    """

    username: str
    area: str
    root: Path
    parts: tuple[str, ...]
    path: Path

    @property
    def rel(self) -> str:
        return "/".join(self.parts)

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else AREA_LABELS[self.area]

    @property
    def spec_path(self) -> str:
        return spec_path(self.area, self.rel)

    @property
    def writable(self) -> bool:
        return self.area == HOME

    def crumbs(self) -> list[tuple[str, str]]:
        """(label, rel) from the area's top folder down to this one, for breadcrumbs."""
        crumbs = [(AREA_LABELS[self.area], "")]
        crumbs += [(part, "/".join(self.parts[: i + 1])) for i, part in enumerate(self.parts)]
        return crumbs

    def parent(self) -> Location:
        """The folder this is in (the area's top folder for a top-level name)."""
        return locate(self.username, "/".join(self.parts[:-1]), self.area)

    def child(self, name: str) -> Location:
        name = check_name(name)
        return locate(self.username, f"{self.rel}/{name}" if self.rel else name, self.area, new=True)

    def real(self) -> Path:
        """The file or folder this names, symlinks followed; it must exist and be readable."""
        if not os.path.lexists(self.path):
            raise NotFound(f"{self.rel or AREA_LABELS[self.area]} does not exist.")
        real = self.path.resolve()
        if not os.path.exists(real):
            raise NotFound(f"{self.rel} is a broken link.")
        if not _inside_any(real, _readable_roots(self.username)):
            raise InvalidPath(f"{self.rel} is a link that leads outside the folders you can read.")
        return real


@dataclass(frozen=True)
class Entry:
    name: str
    rel: str
    kind: str  # "dir", "file", or "link" for a link that cannot be followed
    is_link: bool
    size: int | None
    modified: datetime | None
    spec_path: str


@dataclass(frozen=True)
class Listing:
    location: Location
    entries: list[Entry]
    truncated: bool


def spec_path(area: str, rel: str) -> str:
    prefix = SPEC_PREFIXES[area]
    return f"{prefix}/{rel}" if rel else prefix


def area_root(username: str, area: str) -> Path:
    if area == HOME:
        home = home_dir(username)
        if not home.is_dir():
            # Homes are made when a user is created; this covers a shared root that was moved
            # or wiped since.
            ensure_home(username)
        return home.resolve()
    return (shared_root() / area).resolve()


def _readable_roots(username: str) -> tuple[Path, ...]:
    return tuple(area_root(username, area) for area in AREAS)


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _inside_any(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(_inside(path, root) for root in roots)


def check_name(name: str, field: str = "name") -> str:
    """A single file or folder name: no ``/``, no ``..``, nothing a shell would choke on."""
    if name in ("", ".", ".."):
        raise InvalidPath("Give a file or folder name (not '.' or '..').", field)
    if "/" in name or "\x00" in name:
        raise InvalidPath(f"{name!r} is not a plain name: '/' and NUL are not allowed.", field)
    if any(not ch.isprintable() for ch in name):
        raise InvalidPath(f"{name!r} contains control characters.", field)
    if len(name.encode()) > MAX_NAME_BYTES:
        raise InvalidPath(f"The name is longer than {MAX_NAME_BYTES} bytes.", field)
    return name


def split_path(rel: str, *, new: bool = False) -> tuple[str, ...]:
    """The parts of a relative path; '' and '.' parts are dropped, anything that escapes refused.

    A name longer than the storage allows names nothing that exists (404), unless the path is
    ``new``, to be created: then it is a name that cannot be used (400).
    """
    if len(rel) > MAX_PATH_CHARS:
        raise InvalidPath(f"The path is longer than {MAX_PATH_CHARS} characters.")
    if "\x00" in rel:
        raise InvalidPath("The path contains a NUL byte.")
    if rel.startswith("/"):
        raise InvalidPath("Paths are relative to the folder you browse (e.g. datasets/x): no leading '/'.")
    parts = tuple(part for part in rel.split("/") if part not in ("", "."))
    if ".." in parts:
        raise InvalidPath("'..' is not allowed in paths.")
    if any(len(part.encode(errors="surrogateescape")) > MAX_NAME_BYTES for part in parts):
        too_long = f"A name in the path is longer than {MAX_NAME_BYTES} bytes"
        if new:
            raise InvalidPath(f"{too_long}.")
        raise NotFound(f"{too_long}: no file or folder can have it.")
    return parts


def locate(username: str, rel: str, area: str = HOME, *, new: bool = False) -> Location:
    """Check ``rel`` inside ``area`` for ``username`` (``new``: a path to create); nothing is
    created or changed."""
    if area not in AREAS:
        raise InvalidPath(f"Unknown area {area!r}: use one of {', '.join(AREAS)}.", "area")
    parts = split_path(rel, new=new)
    root = area_root(username, area)
    if not parts:
        return Location(username, area, root, parts, root)
    parent = root.joinpath(*parts[:-1]).resolve()
    if not _inside_any(parent, _readable_roots(username)):
        raise InvalidPath(f"{'/'.join(parts)} goes through a link to outside the folders you can read.")
    return Location(username, area, root, parts, parent / parts[-1])


# The whole tree as SFTP shows it: the home is `/`, each shared area where its spec macro puts
# it under $HOME (common/datasets, common/hf); `common` itself is a folder of those two only.
TREE_AREAS = {tuple(SPEC_PREFIXES[area].split("/")[1:]): area for area in SHARED_AREAS}
TREE_FOLDERS = frozenset(prefix[:i] for prefix in TREE_AREAS for i in range(1, len(prefix)))


def locate_in_tree(username: str, path: str, *, new: bool = False) -> Location | tuple[str, ...]:
    """``path`` in the tree with the home as ``/`` (absolute or not): its Location, or the
    parts of a folder of that tree that is no area's (``("common",)``), which holds only areas.
    The same rules as ``locate``: no ``..``, no link out of what the user may read."""
    parts = split_path(path.lstrip("/"), new=new)
    if parts in TREE_FOLDERS:
        return parts
    for prefix, area in TREE_AREAS.items():
        if parts[: len(prefix)] == prefix:
            return locate(username, "/".join(parts[len(prefix) :]), area, new=new)
    if parts[:1] in TREE_FOLDERS:
        if new:
            raise ReadOnly(f"{parts[0]}/ holds only the shared folders: nothing can be added there.")
        raise NotFound(f"/{'/'.join(parts)} does not exist: {parts[0]}/ holds only the shared folders.")
    return locate(username, "/".join(parts), HOME, new=new)


def tree_children(parts: tuple[str, ...]) -> list[str]:
    """The names in a folder of the tree that is no area's (see locate_in_tree)."""
    below = (prefix for prefix in (*TREE_AREAS, *TREE_FOLDERS) if len(prefix) > len(parts))
    return sorted({prefix[len(parts)] for prefix in below if prefix[: len(parts)] == parts})


def _check_writable(location: Location, real_folder: Path) -> None:
    if not location.writable:
        raise ReadOnly(f"{AREA_LABELS[location.area]} is read-only: nothing can be changed there.")
    if not _inside(real_folder, location.root):
        raise ReadOnly(f"{location.rel or '/'} is a link to a shared, read-only folder.")


@contextmanager
def _storage(location: Location) -> Iterator[None]:
    """The storage's own refusals, as errors that say what went wrong rather than a crash."""
    what = location.rel or AREA_LABELS[location.area]
    try:
        yield
    except PermissionError:
        raise AccessDenied(f"The storage refuses access to {what} (permission denied).") from None
    except NotADirectoryError:
        raise WrongType(f"A part of {what} is a file, not a folder.") from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpace(f"The storage is full: {what} could not be written.") from None
        raise


def _real_folder(location: Location) -> Path:
    real = location.real()
    if not real.is_dir():
        raise WrongType(f"{location.rel} is a file, not a folder.")
    return real


def list_folder(location: Location, limit: int | None = MAX_LISTING) -> Listing:
    """Folders first, then files, by name; at most ``limit`` entries (None: all, for SFTP,
    whose clients page through a folder themselves)."""
    folder = _real_folder(location)
    readable = _readable_roots(location.username)
    with _storage(location), os.scandir(folder) as scan:
        # An upload still being written is not a file yet.
        visible = (d for d in scan if not d.name.startswith(UPLOAD_TEMP_PREFIX))
        dirents = sorted(visible, key=lambda d: (not d.is_dir(), d.name.lower(), d.name))
    shown = dirents if limit is None else dirents[:limit]
    entries = [_entry(location, d, readable) for d in shown]
    return Listing(location, entries, truncated=len(shown) < len(dirents))


def _entry(location: Location, dirent: os.DirEntry[str], readable: tuple[Path, ...]) -> Entry:
    rel = f"{location.rel}/{dirent.name}" if location.rel else dirent.name
    is_link = dirent.is_symlink()
    try:
        st = dirent.stat()  # follows links
        followable = not is_link or _inside_any(Path(dirent.path).resolve(), readable)
    except OSError:  # a broken link, or a file removed while we list
        st, followable = None, False
    if st is None or not followable:
        return Entry(dirent.name, rel, "link", is_link, None, None, spec_path(location.area, rel))
    is_dir = stat.S_ISDIR(st.st_mode)
    return Entry(
        name=dirent.name,
        rel=rel,
        kind="dir" if is_dir else "file",
        is_link=is_link,
        size=None if is_dir else st.st_size,
        modified=datetime.fromtimestamp(st.st_mtime, tz=UTC),
        spec_path=spec_path(location.area, rel),
    )


def open_file(location: Location) -> BinaryIO:
    """The file, open for reading, for a download."""
    real = location.real()
    if real.is_dir():
        raise WrongType(f"{location.rel or '/'} is a folder: only files can be downloaded.")
    # O_NOFOLLOW: if the file was swapped for a link since it was checked, refuse it.
    with _storage(location):
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
    return os.fdopen(fd, "rb")


def max_upload_bytes() -> int:
    return int(settings.ARGUS_MAX_UPLOAD_BYTES)


# What a multipart body adds around the file itself (boundaries, headers, the small fields),
# so that a body plainly over the limit is refused before it is read.
MULTIPART_SLACK = 64 * 1024


def check_upload_length(content_length: str | None) -> None:
    """Refuse an upload whose declared length is over the limit, before a byte of it is read.

    Django never reads past Content-Length, so checking it first bounds what is read at all.
    """
    try:
        length = int(content_length or 0)
    except ValueError:
        length = 0  # Django's parser treats it the same way
    limit = max_upload_bytes()
    if length > limit + MULTIPART_SLACK:
        raise TooLarge(f"The upload is {length} bytes; the upload limit is {limit} bytes.", "file")


class PendingUpload:
    """A file being written under a temporary name in its own folder (hidden from listings):
    it appears under its name only at ``commit``, so a half-written file is never read as the
    real one. ``discard`` removes what was not committed (harmless after a commit)."""

    def __init__(self, target: Location, real_folder: Path) -> None:
        self.target = target
        with _storage(target):
            fd, temp = tempfile.mkstemp(prefix=UPLOAD_TEMP_PREFIX, dir=real_folder)
        self.temp = Path(temp)
        self.file: BinaryIO = os.fdopen(fd, "w+b")

    def write(self, data: bytes, offset: int | None = None) -> None:
        """Write ``data`` at ``offset``, or (None) at the end, as O_APPEND does: whatever was
        read last through the same handle (SFTP's open for reading and appending)."""
        with _storage(self.target):
            if offset is None:
                self.file.seek(0, os.SEEK_END)
            else:
                self.file.seek(offset)
            self.file.write(data)

    def commit(self, *, overwrite: bool) -> None:
        with _storage(self.target):
            self.file.close()
            os.chmod(self.temp, 0o644)  # mkstemp makes 0600; training jobs must be able to read it
            if overwrite:
                os.replace(self.temp, self.target.path)  # replaces a link itself, never what it points to
                return
            # A hard link fails if the name appeared meanwhile, where a rename would clobber it.
            try:
                os.link(self.temp, self.target.path)
            except FileExistsError:
                raise AlreadyExists(f"{self.target.rel} already exists.", "file") from None
            finally:
                os.unlink(self.temp)

    def discard(self) -> None:
        self.file.close()
        if os.path.lexists(self.temp):
            os.unlink(self.temp)


def begin_upload(target: Location) -> PendingUpload:
    """Start writing the file ``target`` names (in the home only; not over a folder; not while
    the user or their group is over a disk quota). Every upload starts here: the files API, the
    data page (save_upload) and SFTP."""
    real_folder = _real_folder(target.parent())
    _check_writable(target, real_folder)
    if target.path.is_dir() and not target.path.is_symlink():
        raise AlreadyExists(f"{target.rel} is a folder: a file cannot replace it.", "file")
    check_name(target.name, "file")  # SFTP names files in bytes: the API's name rules hold for it too
    check_disk_quota(target.username)
    return PendingUpload(target, real_folder)


def check_disk_quota(username: str) -> None:
    """Refuse any upload while the user or their group is at or over a disk quota (asked by
    begin_upload, and by the files API before it reads a body that may be a gigabyte)."""
    refusal = user_quota_refusal(username)
    if refusal:
        raise DiskQuotaExceeded(refusal, "file")


def save_upload(folder: Location, upload: UploadedFile[bytes], *, name: str = "", overwrite: bool = False) -> Location:
    """Write ``upload`` into ``folder`` as ``name`` (default: its own name).

    An existing name is refused unless ``overwrite``; the file is written under a temporary
    name first and only then appears, so a failed or refused upload leaves nothing behind.
    """
    real_folder = _real_folder(folder)
    _check_writable(folder, real_folder)
    target = folder.child(check_name(name or upload.name or "", "name" if name else "file"))
    limit = max_upload_bytes()
    if upload.size is not None and upload.size > limit:
        raise TooLarge(f"{target.name} is {upload.size} bytes; the upload limit is {limit} bytes.", "file")
    if os.path.lexists(target.path) and not overwrite:
        raise AlreadyExists(f"{target.rel} already exists: ask to overwrite it to replace it.", "file")

    pending = begin_upload(target)
    try:
        for chunk in upload.chunks():
            pending.write(chunk)
        pending.commit(overwrite=overwrite)
    finally:
        pending.discard()
    return target


def check_changeable(location: Location) -> Path:
    """The real file or folder ``location`` names, when the user may change it (its times, say):
    in the home, and not through a link out of it."""
    real = location.real()
    _check_writable(location, real)
    return real


def _check_removable(location: Location) -> None:
    if not location.parts:
        raise ReadOnly("Choose a file or folder: the top folder itself cannot be deleted or moved.")
    _check_writable(location, location.path.parent)
    if location.area == HOME and len(location.parts) == 1 and location.parts[0] in HOME_SUBDIRS:
        raise ReadOnly(f"{location.rel}/ is part of every home and cannot be deleted or moved.")


def move(source: Location, target: Location, *, overwrite: bool = False) -> None:
    """Rename a file, link or folder within the home (a link is moved itself, never what it
    points to); an existing target is refused unless ``overwrite``."""
    _check_removable(source)
    _check_writable(target, target.path.parent)
    check_name(target.name, "path")
    with _storage(source):
        if not os.path.lexists(source.path):
            raise NotFound(f"{source.rel} does not exist.")
        if overwrite:
            os.replace(source.path, target.path)
            return
        # A hard link or rename would clobber a name that appeared meanwhile; renameat2's
        # RENAME_NOREPLACE is not in Python: the window is the SFTP client's own.
        if os.path.lexists(target.path):
            raise AlreadyExists(f"{target.rel} already exists.")
        os.rename(source.path, target.path)


def delete(location: Location, *, recursive: bool = False) -> None:
    """Delete a file or link, an empty folder, or (``recursive``) a folder and all inside it."""
    _check_removable(location)
    with _storage(location):
        try:
            mode = os.lstat(location.path).st_mode
        except FileNotFoundError:
            raise NotFound(f"{location.rel} does not exist.") from None
        if not stat.S_ISDIR(mode):
            os.unlink(location.path)
        elif recursive:
            shutil.rmtree(location.path)  # removes links inside, never follows them
        else:
            try:
                os.rmdir(location.path)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise NotEmpty(
                        f"{location.rel} is not empty: empty it first, or ask for a recursive delete."
                    ) from None
                raise


def make_folder(location: Location) -> None:
    """Create a folder (and missing parents) in the home."""
    if not location.parts:
        raise AlreadyExists("Give the new folder's name: the top folder already exists.")
    # Missing parents are created too: every part follows the rules of an uploaded file's name.
    for part in location.parts:
        check_name(part, "path")
    _check_writable(location, location.path.parent)
    with _storage(location):
        try:
            location.path.mkdir(parents=True)
        except FileExistsError:
            raise AlreadyExists(f"{location.rel} already exists.") from None
