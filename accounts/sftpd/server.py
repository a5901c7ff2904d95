"""The SFTP server: asyncssh's SSH and SFTP protocol, our sign-in and our file tree.

Every path a client names goes through accounts/files.py (locate_in_tree and the functions
the files API uses), so SFTP and the API apply the same rules: the home is `/`, the shared
folders are read-only under common/, no `..`, no link out of what the user may read, no write
outside the home. Any operation not defined here is refused (map_path), never served by
asyncssh's default, which would act on the real file system.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import posixpath
import shutil
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import asyncssh
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import close_old_connections

from accounts import files
from accounts.sftpd import login
from accounts.sftpd.hostkey import host_key

logger = logging.getLogger(__name__)
T = TypeVar("T")

WRITE_FLAGS = asyncssh.FXF_WRITE | asyncssh.FXF_APPEND | asyncssh.FXF_CREAT | asyncssh.FXF_TRUNC
READ_ONLY_BITS = ~0o222


def in_thread(func: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``func`` run off the event loop (the ORM must not run on it), on a live connection."""

    def run(*args: Any) -> T:
        close_old_connections()  # a connection past its age, or broken, is replaced
        return func(*args)

    return sync_to_async(run)


class Gate(asyncssh.SSHServer):
    """One connection's sign-in: a registered key or an API token (accounts/sftpd/login.py)."""

    def __init__(self, connections: set[asyncssh.SSHServerConnection]) -> None:
        self.connections = connections  # the server's open connections, closed when it stops
        self.conn: asyncssh.SSHServerConnection | None = None
        self.address = ""
        self.key: tuple[str, str] | None = None  # (username, fingerprint) last accepted
        self.tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        peer = conn.get_extra_info("peername")
        self.address = str(peer[0]) if peer else ""
        self.conn = conn
        self.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.connections.discard(self.conn)

    def begin_auth(self, username: str) -> bool:
        return True  # everyone signs in

    def public_key_auth_supported(self) -> bool:
        return True

    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        # Asked once to see whether the key would do and again with its signature, which
        # asyncssh checks after: the sign-in is recorded when it completes (auth_completed).
        fingerprint = key.get_fingerprint("sha256")
        if await in_thread(login.locked_out)(username, self.address):
            return False
        if not await in_thread(login.key_known)(username, fingerprint):
            # Not counted as a failure: a client offers each key it has in turn.
            logger.info("SFTP: %r from %s offered key %s, not one of theirs", username, self.address, fingerprint)
            return False
        self.key = (username, fingerprint)
        return True

    def password_auth_supported(self) -> bool:
        return True

    async def validate_password(self, username: str, password: str) -> bool:
        self.key = None
        return await in_thread(login.password_login)(username, password, self.address)

    def auth_completed(self) -> None:
        if self.key is not None:
            username, fingerprint = self.key
            task = asyncio.ensure_future(in_thread(login.key_signed_in)(username, fingerprint, self.address))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)


def for_active_user(method: Callable[..., T]) -> Callable[..., Coroutine[Any, Any, T]]:
    """A Tree method run off the event loop (in_thread: it may query the database), once the
    session's user is found still active: a session opened before they were disabled (kept
    open for hours by a client's keepalives) can do nothing more."""

    @functools.wraps(method)
    async def run(tree: Tree, *args: Any) -> T:
        def checked(*args: Any) -> T:
            tree.check_active()
            return method(tree, *args)

        return await in_thread(checked)(*args)

    return run


@contextmanager
def refusals() -> Iterator[None]:
    """files.py's refusals as SFTP status codes, with the same messages the API gives."""
    try:
        yield
    except files.NotFound as exc:
        raise asyncssh.SFTPNoSuchFile(exc.message) from None
    except (files.ReadOnly, files.InvalidPath, files.AccessDenied) as exc:
        raise asyncssh.SFTPPermissionDenied(exc.message) from None
    except files.FileAreaError as exc:
        raise asyncssh.SFTPFailure(exc.message) from None
    except OSError as exc:
        raise asyncssh.SFTPFailure(exc.strerror or str(exc)) from None


class Upload:
    """A file being written: files.PendingUpload, shown under its name only once closed."""

    def __init__(self, pending: files.PendingUpload, append: bool) -> None:
        self.pending = pending
        self.append = append
        self.failed = False  # a write failed: what it holds is not the file, whatever comes next


def _attrs(st: os.stat_result, writable: bool) -> asyncssh.SFTPAttrs:
    """What a client is told of a file: its kind, size, times and modes (the read-only areas
    without write bits); not the storage's owners, which mean nothing to it."""
    kind = asyncssh.FILEXFER_TYPE_DIRECTORY if stat.S_ISDIR(st.st_mode) else asyncssh.FILEXFER_TYPE_REGULAR
    return asyncssh.SFTPAttrs(
        type=kind,
        size=st.st_size,
        permissions=st.st_mode if writable else st.st_mode & READ_ONLY_BITS,
        atime=int(st.st_atime),
        mtime=int(st.st_mtime),
    )


def _folder_attrs(mtime: int) -> asyncssh.SFTPAttrs:
    """A folder of the tree that is no area's (common/): read-only, holding the shared areas."""
    return asyncssh.SFTPAttrs(type=asyncssh.FILEXFER_TYPE_DIRECTORY, permissions=stat.S_IFDIR | 0o555, mtime=mtime)


class Tree(asyncssh.SFTPServer):
    """One SFTP session: the signed-in user's tree."""

    def __init__(self, chan: asyncssh.SSHServerChannel[bytes]) -> None:
        super().__init__(chan)
        self.username = str(chan.get_extra_info("username"))

    def _where(self, path: bytes, *, new: bool = False) -> files.Location | tuple[str, ...]:
        return files.locate_in_tree(self.username, os.fsdecode(path), new=new)

    def _location(self, path: bytes, *, new: bool = False) -> files.Location:
        where = self._where(path, new=new)
        if isinstance(where, tuple):
            raise files.ReadOnly(f"/{'/'.join(where)} holds only the shared folders: nothing can be changed there.")
        return where

    def check_active(self) -> None:
        if not User.objects.filter(username=self.username, is_active=True).exists():
            raise asyncssh.SFTPPermissionDenied("This user is disabled.")

    def map_path(self, path: bytes) -> bytes:
        raise asyncssh.SFTPOpUnsupported("This operation is not offered here.")

    def realpath(self, path: bytes) -> bytes:
        # Lexical, clamped at `/` as in a chroot: `cd ..` works; what a path names is checked
        # when it is used.
        return posixpath.normpath("/" + os.fsdecode(path).lstrip("/")).encode(errors="surrogateescape")

    def _stat(self, path: bytes) -> asyncssh.SFTPAttrs:
        with refusals():
            where = self._where(path)
            if isinstance(where, tuple):
                return _folder_attrs(int(files.area_root(self.username, files.HOME).stat().st_mtime))
            real = where.real()
            inside_home = where.writable and real.is_relative_to(where.root)
            return _attrs(os.stat(real), inside_home)

    def stat(self, path: bytes) -> asyncssh.SFTPAttrs:
        return self._stat(path)

    def lstat(self, path: bytes) -> asyncssh.SFTPAttrs:
        # Links are shown as what they lead to, as the files API shows them.
        return self._stat(path)

    async def scandir(self, path: bytes) -> AsyncIterator[asyncssh.SFTPName]:
        # Off the event loop: a folder of a hundred thousand files takes seconds to list, and
        # every other session would stand still meanwhile. No database in the listing itself:
        # any thread will do, not in_thread's one, which every sign-in's queries wait for.
        await in_thread(self.check_active)()
        for name, attrs in await asyncio.to_thread(self._listing, path):
            yield asyncssh.SFTPName(name.encode(errors="surrogateescape"), attrs=attrs)

    def _listing(self, path: bytes) -> list[tuple[str, asyncssh.SFTPAttrs]]:
        with refusals():
            where = self._where(path)
            names: list[tuple[str, asyncssh.SFTPAttrs]] = []
            if isinstance(where, tuple):
                mtime = int(files.area_root(self.username, files.HOME).stat().st_mtime)
                names = [(name, _folder_attrs(mtime)) for name in files.tree_children(where)]
            else:
                listing = files.list_folder(where, limit=None)
                # A link that cannot be followed is left out: it leads nowhere the user may read.
                shown = (entry for entry in listing.entries if entry.kind != "link")
                names = [(entry.name, self._entry_attrs(where, entry)) for entry in shown]
                if not where.parts and where.area == files.HOME:
                    # The tree's own folders (common/) hide a home entry of that name.
                    tree = files.tree_children(())
                    names = [(n, a) for n, a in names if n not in tree]
                    names += [(name, self._stat(name.encode())) for name in tree]
        return [(".", self._stat(path)), ("..", self._stat(path)), *names]

    @staticmethod
    def _entry_attrs(folder: files.Location, entry: files.Entry) -> asyncssh.SFTPAttrs:
        writable = folder.writable and not entry.is_link
        kind = stat.S_IFDIR | 0o755 if entry.kind == "dir" else stat.S_IFREG | 0o644
        mtime = int(entry.modified.timestamp()) if entry.modified else None
        return asyncssh.SFTPAttrs(
            type=asyncssh.FILEXFER_TYPE_DIRECTORY if entry.kind == "dir" else asyncssh.FILEXFER_TYPE_REGULAR,
            size=entry.size,
            permissions=kind if writable else kind & READ_ONLY_BITS,
            atime=mtime,
            mtime=mtime,
        )

    @for_active_user  # an upload also asks the database whether the user is over a disk quota
    def open(self, path: bytes, pflags: int, attrs: asyncssh.SFTPAttrs) -> BinaryIO | Upload:
        with refusals():
            if not pflags & WRITE_FLAGS:
                where = self._where(path)
                if isinstance(where, tuple):
                    raise files.WrongType(f"/{'/'.join(where)} is a folder.")
                return files.open_file(where)
            target = self._location(path, new=True)
            exists = os.path.lexists(target.path)
            if exists and pflags & asyncssh.FXF_EXCL:
                raise files.AlreadyExists(f"{target.rel} already exists.")
            if not exists and not pflags & asyncssh.FXF_CREAT:
                raise files.NotFound(f"{target.rel} does not exist.")
            pending = files.begin_upload(target)
            if exists and not pflags & asyncssh.FXF_TRUNC:
                # Writing into an existing file (a resumed upload): into a copy, which replaces it
                # once complete, like any upload. Not a copy of what cannot be read: then no
                # upload at all, nothing of it left behind.
                try:
                    with files.open_file(target) as current:
                        shutil.copyfileobj(current, pending.file)
                except BaseException:
                    pending.discard()
                    raise
            return Upload(pending, append=bool(pflags & asyncssh.FXF_APPEND))

    def read(self, file_obj: object, offset: int, size: int) -> bytes:
        handle = file_obj.pending.file if isinstance(file_obj, Upload) else file_obj
        with refusals():
            handle.seek(offset)  # type: ignore[attr-defined]
            return bytes(handle.read(size))  # type: ignore[attr-defined]

    def write(self, file_obj: object, offset: int, data: bytes) -> int:
        if not isinstance(file_obj, Upload):
            raise asyncssh.SFTPPermissionDenied("This file was opened for reading.")
        try:
            with refusals():
                file_obj.pending.write(data, None if file_obj.append else offset)
        except asyncssh.SFTPError:
            file_obj.failed = True
            raise
        return len(data)

    def close(self, file_obj: object) -> None:
        if not isinstance(file_obj, Upload):
            file_obj.close()  # type: ignore[attr-defined]
            return
        pending = file_obj.pending
        try:
            # asyncssh closes the files a session left open when its channel goes: such an upload
            # was cut short, and never appears under its name.
            if self.channel.is_closing():
                logger.info("SFTP: %s's upload of %s was interrupted; discarded", self.username, pending.target.rel)
                return
            # A client closes its handle after a failed write too (the storage full, say): that
            # upload is not whole either.
            if file_obj.failed:
                logger.info("SFTP: %s's upload of %s failed in a write; discarded", self.username, pending.target.rel)
                raise asyncssh.SFTPFailure(f"The upload of {pending.target.rel} failed: it was not saved.")
            with refusals():
                pending.commit(overwrite=True)
            logger.info("SFTP: %s uploaded %s", self.username, pending.target.spec_path)
        finally:
            pending.discard()

    def fstat(self, file_obj: object) -> asyncssh.SFTPAttrs:
        if isinstance(file_obj, Upload):
            return _attrs(os.fstat(file_obj.pending.file.fileno()), True)
        return _attrs(os.fstat(file_obj.fileno()), False)  # type: ignore[attr-defined]

    def fsetstat(self, file_obj: object, attrs: asyncssh.SFTPAttrs) -> None:
        # Times only (`put -p`), on an upload; ownership and modes are the service's.
        if isinstance(file_obj, Upload) and attrs.mtime is not None:
            file_obj.pending.file.flush()
            os.utime(file_obj.pending.temp, (attrs.atime or attrs.mtime, attrs.mtime))

    @for_active_user
    def setstat(self, path: bytes, attrs: asyncssh.SFTPAttrs) -> None:
        with refusals():
            real = files.check_changeable(self._location(path))
            if attrs.mtime is not None:
                os.utime(real, (attrs.atime or attrs.mtime, attrs.mtime))

    def fsync(self, file_obj: object) -> None:
        if isinstance(file_obj, Upload):
            file_obj.pending.file.flush()
            os.fsync(file_obj.pending.file.fileno())

    @for_active_user
    def mkdir(self, path: bytes, attrs: asyncssh.SFTPAttrs) -> None:
        with refusals():
            files.make_folder(self._location(path, new=True))

    @for_active_user
    def rmdir(self, path: bytes) -> None:
        with refusals():
            location = self._location(path)
            if not stat.S_ISDIR(os.lstat(location.path).st_mode):
                raise files.WrongType(f"{location.rel} is not a folder.")
            files.delete(location)

    @for_active_user
    def remove(self, path: bytes) -> None:
        with refusals():
            location = self._location(path)
            if os.path.isdir(location.path) and not os.path.islink(location.path):
                raise files.WrongType(f"{location.rel} is a folder.")
            files.delete(location)

    @for_active_user
    def rename(self, oldpath: bytes, newpath: bytes) -> None:
        with refusals():
            files.move(self._location(oldpath), self._location(newpath, new=True))

    @for_active_user
    def posix_rename(self, oldpath: bytes, newpath: bytes) -> None:
        with refusals():
            files.move(self._location(oldpath), self._location(newpath, new=True), overwrite=True)

    def readlink(self, path: bytes) -> bytes:
        raise asyncssh.SFTPOpUnsupported("Links are shown as what they lead to.")

    def symlink(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPOpUnsupported("Links cannot be made over SFTP.")

    def link(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPOpUnsupported("Links cannot be made over SFTP.")


@dataclass
class Sftpd:
    """The listening server and its open connections."""

    acceptor: asyncssh.SSHAcceptor
    connections: set[asyncssh.SSHServerConnection]

    async def stop(self) -> None:
        """Stop listening and close every session: an upload under way is discarded (Tree.close),
        never left behind under its temporary name. (Closing the listener alone leaves the
        sessions to die with the process, their files never closed.)"""
        self.acceptor.close()
        await self.acceptor.wait_closed()
        open_now = list(self.connections)
        for conn in open_now:
            conn.close()
        await asyncio.gather(*(conn.wait_closed() for conn in open_now))


async def start(host: str, port: int, key_path: Path, **options: Any) -> Sftpd:
    """Listen on host:port (port 0: any free one). SFTP only: no shell, no forwarding.

    SFTP version 3, asyncssh's default and OpenSSH's only one, which every client speaks: the
    versions 5 and 6 opens (open56) are left to asyncssh's default, refused by map_path."""
    connections: set[asyncssh.SSHServerConnection] = set()
    acceptor = await asyncssh.create_server(
        lambda: Gate(connections),
        host,
        port,
        server_host_keys=[host_key(key_path)],
        sftp_factory=Tree,
        allow_scp=False,
        agent_forwarding=False,
        x11_forwarding=False,
        kbdint_auth=False,
        **options,
    )
    return Sftpd(acceptor, connections)
