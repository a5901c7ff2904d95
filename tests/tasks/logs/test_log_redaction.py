"""Every way a byte of a log reaches a person goes through one redaction that sees whole lines
(tasks.logs.task_redaction.served): the logs API's whole log (the page's download link), its tail (the
page's live tail), its follow (`argus logs -f`, `submit --follow`: tests/cli/test_logs_redacted.py),
the curves' metric names, and what an attempt's message and key error line quote of the log
(tasks.logs.logfile.read_tail). Each test plants a secret's value where one used to get through:
across the border of two reads, at the start of a follow, inside a 2 MiB line, in a metric's name,
at the front of the window a failure is read in; and finds no piece of it served."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Secret
from common.redact import REDACTED, SHAPE_REACH, Redactor
from devkit.fake_ray import FakeRay
from tasks.attempts import Attempt
from tasks.choices import TaskState
from tasks.logs import logfile
from tasks.logs.logfile import BLOCK, follow, read_tail, tail_start
from tasks.logs.task_redaction import LINE_MAX, served
from tasks.models import Event, Task
from tasks.scheduler.sync import LOG_TAIL_BYTES
from tasks.scheduler.tick import tick
from tests.conftest import PPO_SPEC

pytestmark = pytest.mark.django_db
# Printable (as a secret's value must be), and no three characters of it occur in anything else
# these logs or Argus's marks hold: a piece of it served is found by its 3-grams.
VALUE = "Q7#kP2@mZ9!wR4$tB6%"
HF = "hf_" + "A1b2C3d4E5" * 4
MARK = re.compile(rb" \[argus: line cut, (\d+) bytes not shown\]")


def leaks(body: bytes) -> list[str]:
    """The pieces of VALUE (three characters or more) in ``body``."""
    return [VALUE[i : i + 3] for i in range(len(VALUE) - 2) if VALUE[i : i + 3].encode() in body]


def chunks_of(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


# ---- The cut of a long line (pure: the Redactor and bytes).

LONG = 2 * LINE_MAX


@pytest.mark.parametrize("chunk", [BLOCK, 3 * LINE_MAX], ids=["read-blocks", "one-chunk"])
@pytest.mark.parametrize("offset", [-400, -SHAPE_REACH - len(VALUE) - 1, -SHAPE_REACH - 5, -30, -1, 0, 7, 5000])
def test_a_line_over_1_mib_is_cut_where_no_value_runs_across_and_marked(offset: int, chunk: int) -> None:
    """The value starts ``offset`` bytes from 1 MiB into a 2 MiB line: before the cut, across it,
    at it, after it. The line is shown up to SHAPE_REACH bytes before 1 MiB, or up to the value
    where it runs across that point; then a mark counts what is not shown; the next line is whole."""
    at = LINE_MAX + offset
    line = b"x" * at + VALUE.encode() + b"x" * (LONG - at - len(VALUE))
    data = b"first line\n" + line + b"\nnext " + VALUE.encode() + b"\n"
    body = b"".join(served(Redactor([VALUE]), chunks_of(data, chunk)))
    assert leaks(body) == []
    cut = LINE_MAX - SHAPE_REACH
    shown = at if at < cut < at + len(VALUE) else cut
    value_shown = at + len(VALUE) <= shown
    head = b"x" * at + REDACTED.encode() + b"x" * (shown - at - len(VALUE)) if value_shown else b"x" * shown
    mark = b" [argus: line cut, %d bytes not shown]" % (len(line) - shown)
    assert body == b"first line\n" + head + mark + b"\nnext " + REDACTED.encode() + b"\n"


@pytest.mark.parametrize("start", [LINE_MAX - 100, LINE_MAX - SHAPE_REACH - 10, LINE_MAX - 40])
def test_a_credential_shape_running_across_the_cut_is_not_shown(start: int) -> None:
    line = b"y" * (start - 1) + b" " + HF.encode() + b" " + b"y" * LINE_MAX + b"\n"
    body = b"".join(served(Redactor(), chunks_of(line, BLOCK)))
    assert HF[:6].encode() not in body and HF[-8:].encode() not in body
    assert MARK.search(body) and body.endswith(b"]\n")


def test_a_line_of_1_mib_is_whole_and_a_long_unended_line_is_counted_to_the_end() -> None:
    whole = b"z" * (LINE_MAX - len(VALUE)) + VALUE.encode()
    assert b"".join(served(Redactor([VALUE]), [whole + b"\r", b"ok"])) == whole[: -len(VALUE)] + b"[redacted]\rok"
    unended = b"z" * (LINE_MAX + 10) + VALUE.encode() + b"z" * LINE_MAX
    body = b"".join(served(Redactor([VALUE]), chunks_of(unended, BLOCK)))
    assert leaks(body) == [] and int(MARK.findall(body)[0]) == len(unended) - (LINE_MAX - SHAPE_REACH)


@pytest.mark.parametrize("border", range(-len(VALUE) - 1, 2))
def test_a_value_across_two_reads_is_redacted_whole(border: int) -> None:
    data = b"a" * (BLOCK + border) + VALUE.encode() + b"b\nnext\n"
    assert b"".join(served(Redactor([VALUE]), chunks_of(data, BLOCK))) == (
        b"a" * (BLOCK + border) + REDACTED.encode() + b"b\nnext\n"
    )


# ---- Where reads start: always at a line's start.


def reference_start(data: bytes, lines: int) -> int:
    """tail_start as a person counts lines: an unfinished last line is one."""
    parts = re.findall(rb"[^\n]*\n|[^\n]+$", data)
    if lines == 0:
        return len(data) - (len(parts[-1]) if parts and not parts[-1].endswith(b"\n") else 0)
    return len(data) - len(b"".join(parts[-lines:]))


def test_a_tail_starts_at_a_line_start_wherever_the_file_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every length the log passes through while it is written, every tail, across block borders."""
    monkeypatch.setattr(logfile, "BLOCK", 5)
    text = b"one\n\nthree " + VALUE.encode() + b"\nfour\r\nfive\nsix\n"
    path = tmp_path / "driver.log"
    for size in range(len(text) + 1):
        path.write_bytes(text[:size])
        for lines in range(6):
            start = tail_start(path, lines)
            assert start == reference_start(text[:size], lines), (size, lines)
            assert start == 0 or text[start - 1 : start] == b"\n"
    assert tail_start(tmp_path / "missing.log", 3) == 0


def test_what_a_failure_is_read_in_holds_whole_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "driver.log"
    path.write_bytes(b"first\ntoken " + VALUE.encode() + b" end\nlast\n")
    front = len(b"first\ntoken ") + 5  # the window starts inside the value
    size = path.stat().st_size - front
    assert read_tail(path, size) == "last\n"
    assert read_tail(path, size + 10) == "last\n"  # from the "o" of "token"
    assert read_tail(path, size + 11) == f"token {VALUE} end\nlast\n"  # starts just after a line feed
    assert read_tail(path, 4096, since=len(b"first\n")) == f"token {VALUE} end\nlast\n"
    assert read_tail(path, 3) == ""  # only a cut line: nothing
    assert read_tail(tmp_path / "missing.log", 10) == ""


def test_a_follow_gets_a_line_written_in_pieces_whole(tmp_path: Path) -> None:
    """The writer's pieces land between the follow's reads (its ``finished`` is asked before each)."""
    path = tmp_path / "driver.log"
    path.write_bytes(b"")
    pieces = [b"start\ntoken Q7#k", b"P2@mZ9!w", b"R4$tB6% end\nmore\nunfin", b"ished\n"]

    def finished() -> bool:
        if pieces:
            with path.open("ab") as handle:
                handle.write(pieces.pop(0))
        return not pieces

    reads = list(follow(path, start=0, finished=finished, poll_s=0))
    assert len(reads) == 4  # one read per piece: the value was split between reads
    body = b"".join(served(Redactor([VALUE]), reads))
    assert body == b"start\ntoken [redacted] end\nmore\nunfinished\n"


# ---- Through the API and the page.


@pytest.fixture
def secret_task(alice: User, make_task: Callable[..., Task]) -> Task:
    Secret.put(alice, "HF_TOKEN", VALUE)
    return make_task(alice, PPO_SPEC + "secrets: [HF_TOKEN]\n", state=TaskState.RUNNING)


def with_log(task: Task, path: Path, data: bytes, **fields: Any) -> Attempt:
    path.write_bytes(data)
    return task.attempts.create(attempt_no=1, ray_submission_id=f"{task.task_id}--a01", log_path=str(path), **fields)


# The value across the border of the first two reads, in the middle of a 2 MiB line, at 1 MiB
# into another, and on the last line.
PLANTED = (
    b"a" * (BLOCK - 7)
    + VALUE.encode()
    + b"\n"
    + b"m" * LINE_MAX
    + VALUE.encode()
    + b"m" * LINE_MAX
    + b"\n"
    + b"c" * (LINE_MAX - 8)
    + VALUE.encode()
    + b"c" * LINE_MAX
    + b"\n"
    + b"last "
    + VALUE.encode()
    + b"\n"
)


def body_of(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_every_mode_of_the_logs_api_and_the_page_serve_no_piece_of_a_value(
    secret_task: Task, alice: User, client_for: Callable[[User | None], APIClient], client: Client, tmp_path: Path
) -> None:
    with_log(secret_task, tmp_path / "driver.log", PLANTED, end_time=timezone.now())
    api = client_for(alice)
    base = f"/api/v2/tasks/{secret_task.task_id}/logs"
    client.force_login(alice)
    bodies = {
        "whole (the download)": body_of(api.get(base)),
        "tail": body_of(api.get(f"{base}?tail=3")),
        "follow": body_of(api.get(f"{base}?follow=1&tail=100")),
        "follow from the end": body_of(api.get(f"{base}?follow=1&tail=0")),
        "the page's live tail": body_of(client.get(f"{base}?tail=200")),  # static/js/task.js, by session
    }
    for mode, body in bodies.items():
        assert leaks(body) == [], mode
    assert bodies["whole (the download)"].startswith(b"a" * (BLOCK - 7) + REDACTED.encode() + b"\n")
    assert len(MARK.findall(bodies["whole (the download)"])) == 2
    assert bodies["follow"] == bodies["whole (the download)"]  # its four lines
    assert bodies["tail"] == bodies["whole (the download)"].split(b"\n", 1)[1]
    assert bodies["tail"].endswith(b"last [redacted]\n") and bodies["follow from the end"] == b""


def test_a_follow_starts_at_a_line_start_while_the_log_grows(
    secret_task: Task,
    alice: User,
    client_for: Callable[[User | None], APIClient],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The log grows right after the follow's start is found (where the old code measured the
    file and read its tail apart, and started mid-line); then it grows between the follow's
    polls with a line in pieces, and the attempt ends."""
    log = tmp_path / "driver.log"
    attempt = with_log(secret_task, log, b"one " + VALUE.encode() + b"\ntwo\n")
    pieces = [b"three " + VALUE.encode()[:5], VALUE.encode()[5:] + b" four\n"]

    def grow(data: bytes) -> None:
        with log.open("ab") as handle:
            handle.write(data)

    def start_then_grow(path: Path, lines: int) -> int:
        start = tail_start(path, lines)
        grow(b"grown " + VALUE.encode() + b"\n")
        return start

    def poll(seconds: float) -> None:
        grow(pieces.pop(0))
        if not pieces:
            Attempt.objects.filter(pk=attempt.pk).update(end_time=timezone.now())

    monkeypatch.setattr("tasks.api.views.tail_start", start_then_grow)
    monkeypatch.setattr("tasks.logs.logfile.time.sleep", poll)
    response = client_for(alice).get(f"/api/v2/tasks/{secret_task.task_id}/logs?follow=1&tail=1")
    body = body_of(response)
    assert body == b"two\ngrown [redacted]\nthree [redacted] four\n"


def test_metric_names_are_served_redacted(
    secret_task: Task, alice: User, client_for: Callable[[User | None], APIClient], tmp_path: Path
) -> None:
    line = f"step:1 - loss/{VALUE}:0.5 - critic/score:1.25\n"
    with_log(secret_task, tmp_path / "driver.log", (line + line.replace("step:1", "step:2")).encode())
    response = client_for(alice).get(f"/api/v2/tasks/{secret_task.task_id}/metrics")
    assert response.status_code == 200 and leaks(response.content) == []
    assert set(response.json()["series"]) == {"loss/[redacted]", "critic/score"}


# ---- What an attempt and the task say of a failure.


def test_a_failure_read_from_a_window_that_cuts_a_value_quotes_no_piece_of_it(
    alice: User, make_task: Callable[..., Task], fake_ray: Callable[[list[int]], FakeRay]
) -> None:
    """The key error line is the log's last line when Ray says nothing: the 64 KiB Argus reads
    of the log's end start inside a value, on the one line that window holds."""
    ray = fake_ray([4])
    Secret.put(alice, "HF_TOKEN", VALUE)
    task = make_task(alice, PPO_SPEC + "secrets: [HF_TOKEN]\n")
    tick()
    attempt = task.attempts.get()
    line = b"RuntimeError: refused " + VALUE.encode() + b" " + b"r" * (LOG_TAIL_BYTES - 12) + b"\n"
    Path(attempt.log_path).parent.mkdir(parents=True, exist_ok=True)
    Path(attempt.log_path).write_bytes(b"starting\n" + line)
    assert VALUE[10:].encode() in Path(attempt.log_path).read_bytes()[-LOG_TAIL_BYTES:]  # the window cuts it
    ray.set_status(attempt.ray_submission_id, "FAILED", message="")
    tick()
    task.refresh_from_db()
    attempt.refresh_from_db()
    assert task.state == TaskState.FAILED
    said = [task.error_summary, attempt.message, *Event.objects.filter(task=task).values_list("message", flat=True)]
    assert all(leaks(text.encode()) == [] for text in said), said
