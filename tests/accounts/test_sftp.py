"""SFTP end to end: the real OpenSSH client (`sftp -b`) against `manage.py sftpd`, started as
`make run` starts it, in its own process on the test database.

One server for the module (its start costs seconds); each test's users, keys and tokens are
committed to the test database, which the server reads at every sign-in. Passwords (API tokens)
go to OpenSSH's own prompt through SSH_ASKPASS, as a person would type them: no other program.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.utils import timezone

from accounts import files
from accounts.diskusage.models import DiskUsage
from accounts.homes import home_dir
from accounts.limits import set_limits
from accounts.models import ApiToken
from accounts.sftpd import login
from accounts.sftpd.hostkey import host_key
from accounts.sftpd.server import Tree, Upload
from accounts.sshkeys.models import SshKey
from devkit.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
RELAY = Path(__file__).with_name("sftp_relay.py")
# Low, so the throttle test reaches it; each other test fails at most FAILURE_LIMIT - 1 times
# (the database, and so axes' count, is emptied after each test).
FAILURE_LIMIT = 4

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # One xdist worker runs them all: one server start (seconds) rather than one per worker.
    pytest.mark.xdist_group("sftp"),
]


def _test_database_url() -> str:
    db = django_settings.DATABASES["default"]
    if "sqlite" in db["ENGINE"]:
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    log: Path


def start_server(root: Path, host_key: Path, log: Path) -> Server:
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "ARGUS_SHARED_ROOT": str(root),
        "ARGUS_SFTP_HOST_KEY": str(host_key),
        "ARGUS_LOGIN_FAILURE_LIMIT": str(FAILURE_LIMIT),
        "ARGUS_LOG_FORMAT": "plain",
    }
    process = subprocess.Popen(
        [sys.executable, "manage.py", "sftpd", "--host", "127.0.0.1", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    ready = "SFTP listening on 127.0.0.1:"

    def listening() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"sftpd exited: {log.read_text()}")
        return ready in log.read_text()

    wait_for(listening, "sftpd to listen", timeout=60, interval=0.05)
    port = int(log.read_text().split(ready, 1)[1].split()[0])
    return Server(port, process, log)


def stop_server(server: Server) -> None:
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(30) == 0, server.log.read_text()


@pytest.fixture(scope="module")
def sftp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sftp")


@pytest.fixture(scope="module")
def server(sftp_root: Path, django_db_setup: None) -> Iterator[Server]:
    server = start_server(sftp_root / "private", sftp_root / "host_key", sftp_root / "sftpd.log")
    yield server
    stop_server(server)


@pytest.fixture(autouse=True)
def shared_root(settings, sftp_root: Path) -> Path:
    """The server's ARGUS_SHARED_ROOT, emptied for each test (conftest's gives each test its own)."""
    root = sftp_root / "private"
    shutil.rmtree(root, ignore_errors=True)
    (root / "datasets" / "gsm8k").mkdir(parents=True)
    (root / "datasets" / "gsm8k" / "train.parquet").write_bytes(b"PAR1 shared")
    (root / "hf").mkdir()
    settings.ARGUS_SHARED_ROOT = root
    return root


@dataclass
class Key:
    private: Path
    public: str


@pytest.fixture
def make_key(tmp_path: Path) -> Callable[[str], Key]:
    def make(name: str) -> Key:
        path = tmp_path / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True)
        return Key(path, path.with_suffix(".pub").read_text())

    return make


@dataclass
class Session:
    ok: bool
    output: str


class Client:
    """Runs `sftp -b` batches as one user, with a key or with a token as the password."""

    def __init__(self, server: Server, tmp_path: Path) -> None:
        self.server = server
        self.tmp_path = tmp_path

    def argv(self, username: str, batch: Path, *, key: Key | None, extra: tuple[str, ...] = ()) -> list[str]:
        argv = ["sftp", "-P", str(self.server.port), "-o", "StrictHostKeyChecking=no"]
        argv += ["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "IdentityAgent=none"]
        if key is not None:
            argv += ["-i", str(key.private), "-o", "IdentitiesOnly=yes", "-o", "PasswordAuthentication=no"]
        else:
            # sftp -b turns BatchMode on, which never asks for a password; the first setting
            # given wins in ssh, so this one, before -b, lets OpenSSH ask SSH_ASKPASS once.
            argv += ["-o", "BatchMode=no", "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1"]
        return [*argv, *extra, "-b", str(batch), f"{username}@127.0.0.1"]

    def env(self, password: str | None) -> dict[str, str]:
        env = dict(os.environ)
        if password is not None:
            askpass = self.tmp_path / "askpass.sh"
            (self.tmp_path / "password").write_text(password)
            askpass.write_text(f"#!/bin/sh\ncat {self.tmp_path / 'password'}\n")
            askpass.chmod(0o700)
            env.update(SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force")
        return env

    def batch(self, commands: str) -> Path:
        batch = self.tmp_path / "batch"
        batch.write_text(commands.strip() + "\n")
        return batch

    def run(self, username: str, commands: str, *, key: Key | None = None, password: str | None = None) -> Session:
        argv = self.argv(username, self.batch(commands), key=key)
        done = subprocess.run(
            argv, cwd=self.tmp_path, env=self.env(password), stdin=subprocess.DEVNULL, capture_output=True, timeout=60
        )
        return Session(done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace"))


@pytest.fixture
def sftp(server: Server, tmp_path: Path) -> Client:
    return Client(server, tmp_path)


@pytest.fixture
def alice_key(alice: User, make_key: Callable[[str], Key]) -> Key:
    key = make_key("alice-laptop")
    SshKey.register(alice, "laptop", key.public)
    return key


def test_a_registered_key_signs_in_to_the_home_as_root(sftp: Client, alice: User, alice_key: Key, tmp_path: Path):
    (tmp_path / "train.jsonl").write_text('{"q": 1}\n')
    session = sftp.run(
        "alice",
        """
        put train.jsonl datasets/train.jsonl
        ls -1
        get /datasets/train.jsonl back.jsonl
        """,
        key=alice_key,
    )
    assert session.ok, session.output
    assert (home_dir("alice") / "datasets" / "train.jsonl").read_text() == '{"q": 1}\n'
    assert (tmp_path / "back.jsonl").read_text() == '{"q": 1}\n'
    listed = session.output.split("ls -1\n", 1)[1].split("sftp>", 1)[0].split()
    assert listed == ["code", "common", "datasets", "jobs", "models"]
    assert SshKey.objects.get(user=alice).last_used_at is not None


def test_an_api_token_is_the_password_and_only_its_owners(sftp: Client, alice: User, bob: User):
    _, alices = ApiToken.issue(alice)
    _, bobs = ApiToken.issue(bob)
    assert sftp.run("alice", "mkdir code/x", password=alices).ok
    assert (home_dir("alice") / "code" / "x").is_dir()
    refused = sftp.run("alice", "ls", password=bobs)
    assert not refused.ok and "Permission denied" in refused.output
    refused = sftp.run("alice", "ls", password="argus_not-a-token")
    assert not refused.ok and "Permission denied" in refused.output
    log = sftp.server.log.read_text()
    assert "SFTP sign-in failed for 'alice' from 127.0.0.1: the token is another user's" in log
    assert "SFTP sign-in failed for 'alice' from 127.0.0.1: Invalid token." in log


def test_a_revoked_token_a_deleted_key_and_a_disabled_user_are_refused(
    sftp: Client, alice: User, alice_key: Key, make_key: Callable[[str], Key]
):
    token, raw = ApiToken.issue(alice)
    assert sftp.run("alice", "ls", password=raw).ok
    token.revoke()
    refused = sftp.run("alice", "ls", password=raw)
    assert not refused.ok and "Permission denied" in refused.output
    assert "SFTP sign-in failed for 'alice' from 127.0.0.1: This token has been revoked." in sftp.server.log.read_text()

    assert sftp.run("alice", "ls", key=alice_key).ok
    SshKey.objects.get(user=alice, name="laptop").delete()
    refused = sftp.run("alice", "ls", key=alice_key)
    assert not refused.ok and "Permission denied" in refused.output

    other = make_key("alice-desktop")
    SshKey.register(alice, "desktop", other.public)
    _, raw = ApiToken.issue(alice)
    assert sftp.run("alice", "ls", key=other).ok
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert not sftp.run("alice", "ls", key=other).ok
    assert not sftp.run("alice", "ls", password=raw).ok


def test_failed_sign_ins_are_throttled_per_account(sftp: Client, alice: User, alice_key: Key):
    for _ in range(FAILURE_LIMIT):
        assert not sftp.run("alice", "ls", password="argus_wrong").ok
    # Locked out now, even with her key, as the web sign-in is even with the right password.
    locked = sftp.run("alice", "ls", key=alice_key)
    assert not locked.ok and "Permission denied" in locked.output
    assert "SFTP sign-in refused for 'alice' from 127.0.0.1: too many failed sign-ins" in sftp.server.log.read_text()


def test_the_common_folders_are_read_only(sftp: Client, alice: User, alice_key: Key, shared_root: Path, tmp_path):
    (tmp_path / "mine.txt").write_text("mine\n")
    session = sftp.run(
        "alice",
        """
        cd /common
        ls -1
        cd /
        get /common/datasets/gsm8k/train.parquet got.parquet
        -put mine.txt /common/datasets/mine.txt
        -put mine.txt /common/mine.txt
        -mkdir /common/hf/models
        -rm /common/datasets/gsm8k/train.parquet
        -rename /common/datasets/gsm8k /datasets/gsm8k
        -rmdir /common/datasets
        """,
        key=alice_key,
    )
    assert session.ok, session.output
    assert (tmp_path / "got.parquet").read_bytes() == b"PAR1 shared"
    assert session.output.split("ls -1\n", 1)[1].split("sftp>", 1)[0].split() == ["datasets", "hf"]
    assert session.output.count("Permission denied") == 6, session.output
    shared = [p.relative_to(shared_root / "datasets").as_posix() for p in (shared_root / "datasets").rglob("*")]
    assert sorted(shared) == ["gsm8k", "gsm8k/train.parquet"]
    assert list((shared_root / "hf").iterdir()) == []
    assert not (home_dir("alice") / "datasets" / "gsm8k").exists()


def test_no_escape_and_nothing_of_another_users(
    sftp: Client, alice: User, alice_key: Key, bob: User, tmp_path: Path, shared_root: Path
):
    bobs = home_dir("bob")
    (bobs / "datasets").mkdir(parents=True, exist_ok=True)
    (bobs / "datasets" / "secret.txt").write_text("bob's secret\n")
    alices = home_dir("alice")
    (alices / "bob").symlink_to(bobs)  # links out of what she may read
    (alices / "etc").symlink_to("/etc")
    (alices / "code" / "gsm8k").symlink_to(shared_root / "datasets" / "gsm8k")  # a fine link: into common
    (tmp_path / "x.txt").write_text("x\n")
    session = sftp.run(
        "alice",
        """
        -get ../bob/datasets/secret.txt s1.txt
        -get /../../bob/datasets/secret.txt s2.txt
        -get bob/datasets/secret.txt s3.txt
        -get etc/hostname s4.txt
        -ls bob
        -put x.txt bob/datasets/x.txt
        -put x.txt code/gsm8k/x.txt
        -mkdir etc/argus
        cd ..
        cd ..
        pwd
        ls -1
        get code/gsm8k/train.parquet through-link.parquet
        """,
        key=alice_key,
    )
    assert session.ok, session.output
    assert not any((tmp_path / f"s{i}.txt").exists() for i in range(1, 5)), session.output
    # sftp's `get` looks first and says "not found" when the server refuses the look too.
    assert session.output.count("not found") == 5, session.output
    assert session.output.count("Permission denied") == 3, session.output
    assert (tmp_path / "through-link.parquet").read_bytes() == b"PAR1 shared"
    assert "Remote working directory: /\n" in session.output
    # The links out are left out of her listing; the one into common is there.
    assert session.output.split("ls -1\n", 1)[1].split("sftp>", 1)[0].split() == [
        "code",
        "common",
        "datasets",
        "jobs",
        "models",
    ]
    assert "bob's secret" not in session.output
    assert sorted(os.listdir(bobs / "datasets")) == ["secret.txt"]
    assert not (shared_root / "datasets" / "gsm8k" / "x.txt").exists()
    assert not Path("/etc/argus").exists()


def test_an_upload_over_the_disk_quota_is_refused(sftp: Client, alice: User, alice_key: Key, tmp_path: Path):
    (tmp_path / "mine.txt").write_text("mine\n")
    set_limits(alice, actor="test", disk_quota_bytes=1000)
    DiskUsage.objects.create(user=alice, used_bytes=1000, measured_at=timezone.now())
    session = sftp.run("alice", "put mine.txt datasets/mine.txt", key=alice_key)
    assert not session.ok, session.output
    assert not (home_dir("alice") / "datasets" / "mine.txt").exists()
    assert not list((home_dir("alice") / "datasets").glob(".argus-upload-*"))
    # Under it again (files deleted, the next scan): the same upload goes in.
    DiskUsage.objects.filter(user=alice).update(used_bytes=999)
    assert sftp.run("alice", "put mine.txt datasets/mine.txt", key=alice_key).ok
    assert (home_dir("alice") / "datasets" / "mine.txt").read_text() == "mine\n"


def test_an_interrupted_upload_never_appears_under_its_name(sftp: Client, alice: User, alice_key: Key, tmp_path: Path):
    """The connection goes through a relay that stops after 1 MiB of a 4 MiB upload, once the
    server holds part of it; then the client is killed."""
    (tmp_path / "big.bin").write_bytes(os.urandom(4 << 20))
    flag = tmp_path / "relay-held"
    relay = f"{sys.executable} {RELAY} 127.0.0.1 {sftp.server.port} {1 << 20} {flag}"
    argv = sftp.argv("alice", sftp.batch("put big.bin datasets/big.bin"), key=alice_key)
    argv[1:1] = ["-o", f"ProxyCommand={relay}"]
    client = subprocess.Popen(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, start_new_session=True)
    folder = home_dir("alice") / "datasets"

    def partial() -> list[Path]:
        return [path for path in folder.glob(".argus-upload-*") if path.stat().st_size > 0]

    try:
        wait_for(flag.exists, "the relay to hold the upload", interval=0.02)
        wait_for(partial, "part of the upload on the server", interval=0.02)
        assert not (folder / "big.bin").exists()
    finally:
        os.killpg(client.pid, signal.SIGKILL)  # sftp, its ssh and the relay: this test's own group
        client.wait(30)
    wait_for(lambda: not list(folder.glob(".argus-upload-*")), "the partial upload discarded", interval=0.02)
    assert os.listdir(folder) == []
    assert "upload of datasets/big.bin was interrupted; discarded" in sftp.server.log.read_text()
    # And the same upload, not cut short, appears whole.
    assert sftp.run("alice", "put big.bin datasets/big.bin", key=alice_key).ok
    assert (folder / "big.bin").read_bytes() == (tmp_path / "big.bin").read_bytes()


def test_the_host_key_is_made_once_and_kept_across_restarts(tmp_path: Path, shared_root: Path):
    host_key = tmp_path / "state" / "sftp_host_key"

    def served_key() -> str:
        server = start_server(shared_root, host_key, tmp_path / "sftpd.log")
        try:
            scan = subprocess.run(
                ["ssh-keyscan", "-p", str(server.port), "-t", "ed25519", "127.0.0.1"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
        finally:
            stop_server(server)
        return scan.stdout.split(None, 1)[1].strip()

    first = served_key()
    assert host_key.stat().st_mode & 0o777 == 0o600
    assert served_key() == first
    assert first.startswith("ssh-ed25519 ")


def test_a_host_key_file_others_can_read_is_made_private(tmp_path: Path):
    path = tmp_path / "sftp_host_key"
    first = host_key(path)
    path.chmod(0o644)  # copied in, or restored from a backup, with the wrong mode
    assert host_key(path).get_fingerprint("sha256") == first.get_fingerprint("sha256")
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_token_typed_with_a_trailing_newline_signs_in(alice: User):
    # Pasted from a file or a password manager: whitespace is never part of a token.
    _, raw = ApiToken.issue(alice)
    assert login.password_login("alice", f"{raw}\n", "127.0.0.1")
    assert login.password_login("alice", f" {raw} ", "127.0.0.1")


def test_a_folder_is_listed_off_the_event_loop(alice: User, monkeypatch: pytest.MonkeyPatch):
    # A huge folder takes seconds to list: on the event loop, every other session would wait.
    listed_in: list[threading.Thread] = []
    list_folder = files.list_folder

    def recorded(*args: Any, **kwargs: Any) -> files.Listing:
        listed_in.append(threading.current_thread())
        return list_folder(*args, **kwargs)

    monkeypatch.setattr(files, "list_folder", recorded)
    (home_dir("alice") / "code" / "a.txt").write_text("a")
    tree = Tree.__new__(Tree)  # one session's tree, without a channel: only its listing is asked
    tree.username = "alice"

    async def listing() -> tuple[threading.Thread, list[bytes | str]]:
        return threading.current_thread(), [name.filename async for name in tree.scandir(b"/code")]

    loop_thread, names = asyncio.run(listing())
    assert names == [b".", b"..", b"a.txt"]
    assert len(listed_in) == 1 and listed_in[0] is not loop_thread


def test_an_append_write_goes_to_the_end_after_a_read(alice: User):
    # FXF_APPEND: every write lands at the end, whatever the handle last read (as O_APPEND).
    (home_dir("alice") / "code" / "log.txt").write_bytes(b"abc")
    tree = Tree.__new__(Tree)  # one session's tree, without a channel: only the handle is used
    tree.username = "alice"
    flags = asyncssh.FXF_READ | asyncssh.FXF_WRITE | asyncssh.FXF_APPEND
    upload = asyncio.run(tree.open(b"/code/log.txt", flags, asyncssh.SFTPAttrs()))
    assert isinstance(upload, Upload)
    try:
        assert tree.read(upload, 0, 1) == b"a"
        tree.write(upload, 0, b"d")
        upload.pending.file.flush()
        assert upload.pending.temp.read_bytes() == b"abcd"
    finally:
        upload.pending.discard()


def test_a_session_opened_before_its_user_was_disabled_can_do_nothing_more(alice: User):
    tree = Tree.__new__(Tree)  # a session signed in while alice was active
    tree.username = "alice"
    (home_dir("alice") / "code" / "a.txt").write_text("a")
    alice.is_active = False
    alice.save(update_fields=["is_active"])

    async def refused(operation: Awaitable[object]) -> str:
        with pytest.raises(asyncssh.SFTPPermissionDenied) as refusal:
            await operation
        return str(refusal.value)

    async def every_operation() -> list[str]:
        read, write = asyncssh.FXF_READ, asyncssh.FXF_WRITE | asyncssh.FXF_CREAT
        return [
            await refused(tree.open(b"/code/a.txt", read, asyncssh.SFTPAttrs())),
            await refused(tree.open(b"/code/b.txt", write, asyncssh.SFTPAttrs())),
            await refused(tree.mkdir(b"/code/x", asyncssh.SFTPAttrs())),
            await refused(tree.remove(b"/code/a.txt")),
            await refused(tree.rename(b"/code/a.txt", b"/code/c.txt")),
            await refused(tree.posix_rename(b"/code/a.txt", b"/code/c.txt")),
            await refused(tree.setstat(b"/code/a.txt", asyncssh.SFTPAttrs(mtime=0))),
            await refused(tree.rmdir(b"/models")),
            await refused(anext(aiter(tree.scandir(b"/code")))),
        ]

    assert set(asyncio.run(every_operation())) == {"This user is disabled."}
    assert sorted(os.listdir(home_dir("alice") / "code")) == ["a.txt"]


def test_an_upload_held_open_when_the_server_stops_is_discarded(
    alice: User, alice_key: Key, shared_root: Path, tmp_path: Path
):
    # SIGTERM (a deploy, `make run` stopped) with an upload under way: the sessions are closed,
    # and the partial file is removed, not left hidden in the folder for ever.
    server = start_server(shared_root, tmp_path / "sftp_host_key", tmp_path / "sftpd.log")
    (tmp_path / "big.bin").write_bytes(os.urandom(4 << 20))
    flag = tmp_path / "relay-held"
    client = Client(server, tmp_path)
    argv = client.argv("alice", client.batch("put big.bin datasets/big.bin"), key=alice_key)
    argv[1:1] = ["-o", f"ProxyCommand={sys.executable} {RELAY} 127.0.0.1 {server.port} {1 << 20} {flag}"]
    sftp = subprocess.Popen(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, start_new_session=True)
    folder = home_dir("alice") / "datasets"
    try:
        wait_for(flag.exists, "the relay to hold the upload", interval=0.02)
        wait_for(lambda: list(folder.glob(".argus-upload-*")), "the upload begun on the server", interval=0.02)
        stop_server(server)
    finally:
        os.killpg(sftp.pid, signal.SIGKILL)  # sftp, its ssh and the relay: this test's own group
        sftp.wait(30)
        if server.process.poll() is None:
            server.process.kill()
    assert os.listdir(folder) == []


def test_a_refused_write_into_an_existing_file_leaves_no_partial_upload(alice: User):
    # Writing into (not over) a file starts from a copy of it: when it cannot be read (a link
    # out of what alice may read, a link to a folder), nothing of the upload begun is left.
    code = home_dir("alice") / "code"
    (code / "out").symlink_to("/etc/hostname")
    (code / "folder").symlink_to(code.parent / "models")
    tree = Tree.__new__(Tree)
    tree.username = "alice"
    for name in (b"out", b"folder"):
        with pytest.raises(asyncssh.SFTPError):
            asyncio.run(tree.open(b"/code/" + name, asyncssh.FXF_WRITE, asyncssh.SFTPAttrs()))
    assert sorted(os.listdir(code)) == ["folder", "out"]


class OpenChannel:
    """The one thing Tree.close asks of its session's channel: still open."""

    def is_closing(self) -> bool:
        return False


def test_an_upload_whose_write_failed_is_discarded_when_closed(alice: User, monkeypatch: pytest.MonkeyPatch):
    # The storage fills mid-upload: the client is told, then closes its handle as after any
    # error. What it wrote before is not the file: it never appears under the name.
    tree = Tree.__new__(Tree)
    tree.username = "alice"
    tree._chan = OpenChannel()  # type: ignore[assignment]
    flags = asyncssh.FXF_WRITE | asyncssh.FXF_CREAT | asyncssh.FXF_TRUNC
    upload = asyncio.run(tree.open(b"/code/big.bin", flags, asyncssh.SFTPAttrs()))
    tree.write(upload, 0, b"first part")

    def full(*args: Any) -> None:
        raise files.NoSpace("The storage is full: code/big.bin could not be written.")

    monkeypatch.setattr(files.PendingUpload, "write", full)
    with pytest.raises(asyncssh.SFTPFailure, match="The storage is full"):
        tree.write(upload, 10, b"second part")
    with pytest.raises(asyncssh.SFTPFailure, match="it was not saved"):
        tree.close(upload)
    assert os.listdir(home_dir("alice") / "code") == []
