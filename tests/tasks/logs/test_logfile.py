from __future__ import annotations

from pathlib import Path

import pytest
from django.utils import timezone

from tasks.choices import TaskState
from tasks.logs.logfile import end_lines, follow, read_from, tail_start

pytestmark = pytest.mark.django_db


def tail(path: Path, lines: int) -> bytes:
    return b"".join(read_from(path, tail_start(path, lines)))


def test_tail_reads_the_last_lines_of_a_big_log(tmp_path: Path):
    path = tmp_path / "driver.log"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(200_000)))
    assert tail(path, 3) == b"line 199997\nline 199998\nline 199999\n"
    assert tail(path, 0) == b""
    assert tail(tmp_path / "missing.log", 5) == b""


def test_follow_streams_new_lines_until_the_attempt_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "driver.log"
    path.write_bytes(b"first\n")
    more = [b"more %d\n" % i for i in range(3)]
    polls: list[float] = []

    def poll(seconds: float) -> None:
        """The writer's turn comes at each of the follower's pauses: a line more each time."""
        polls.append(seconds)
        with path.open("ab") as handle:
            handle.write(more.pop(0))

    monkeypatch.setattr("tasks.logs.logfile.time.sleep", poll)
    received = [bytes(chunk) for chunk in follow(path, start=0, finished=lambda: not more, poll_s=0.05, max_s=10)]
    assert received == [b"first\n", b"more 0\n", b"more 1\n", b"more 2\n"]  # each as it was written
    assert polls == [0.05] * 3


def _task_with_log(make_task, user, tmp_path: Path, text: str, **attempt_fields):
    task = make_task(user, state=TaskState.RUNNING)
    log = tmp_path / "driver.log"
    log.write_text(text)
    task.attempts.create(attempt_no=1, ray_submission_id=f"{task.task_id}--a01", log_path=str(log), **attempt_fields)
    return task


def test_the_logs_api_gives_the_whole_log_or_its_tail(alice, client_for, make_task, tmp_path):
    task = _task_with_log(make_task, alice, tmp_path, "a\nb\nc\n")
    client = client_for(alice)
    whole = client.get(f"/api/v2/tasks/{task.task_id}/logs")
    assert whole["Content-Type"].startswith("text/plain")
    assert b"".join(whole.streaming_content) == b"a\nb\nc\n"
    assert client.get(f"/api/v2/tasks/{task.task_id}/logs?tail=2").content == b"b\nc\n"


def test_follow_of_an_ended_attempt_returns_the_rest_and_stops(alice, client_for, make_task, tmp_path):
    task = _task_with_log(make_task, alice, tmp_path, "x\ny\n", end_time=timezone.now())
    response = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/logs?follow=1&tail=1")
    assert b"".join(response.streaming_content) == b"y\n"


@pytest.mark.parametrize("query", ["attempt=0", "attempt=x", "tail=-1", "follow=maybe"])
def test_bad_log_parameters_are_named(alice, client_for, make_task, tmp_path, query):
    task = _task_with_log(make_task, alice, tmp_path, "")
    response = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/logs?{query}")
    assert response.status_code == 400
    assert query.split("=")[0] in response.json()["error"]["fields"]


def test_an_unknown_attempt_is_404(alice, client_for, make_task, tmp_path):
    task = _task_with_log(make_task, alice, tmp_path, "")
    assert client_for(alice).get(f"/api/v2/tasks/{task.task_id}/logs?attempt=7").status_code == 404
    assert client_for(alice).get(f"/api/v2/tasks/{task.task_id}/metrics?attempt=7").status_code == 404


@pytest.mark.parametrize(
    ("size", "lines", "cut"),
    [
        (4, [b"ccc", b""], True),  # the window starts a line: that whole line is kept
        (5, [b"ccc", b""], True),  # it starts on the line feed before it
        (6, [b"ccc", b""], True),  # it starts inside "bbb": the cut part is left out
        (3, [b""], True),  # it starts inside "ccc"
        (100, [b"aaa", b"bbb", b"ccc", b""], False),
    ],
)
def test_end_lines_leaves_out_only_a_line_the_window_cuts(tmp_path: Path, size: int, lines: list[bytes], cut: bool):
    log = tmp_path / "driver.log"
    log.write_bytes(b"aaa\nbbb\nccc\n")
    assert end_lines(log, size) == (lines, cut)
    assert end_lines(tmp_path / "missing.log", size) is None
