"""What one look at a head's GCS says, and the one rule that turns looks into "dead"
(``HeadWatch``), with the connection attempt stood in for: no network, no sleeping."""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from raypool.discovery import HeadRecord
from raypool.probe import DEAD_AFTER_LOOKS, HeadWatch, Look, nobody_listens

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def failing(error: OSError) -> Callable[[tuple[str, int], float], socket.socket]:
    def connect(address: tuple[str, int], timeout: float) -> socket.socket:
        raise error

    return connect


def record(port: int = 6400, updated: float = 0) -> HeadRecord:
    return HeadRecord.new(
        cluster_name="c",
        head_ip="10.0.0.1",
        gcs_port=port,
        dashboard_port=8300,
        ttl_s=60,
        now=NOW + timedelta(seconds=updated),
    )


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
        OSError(errno.EHOSTUNREACH, "No route to host"),
        OSError(errno.ENETUNREACH, "Network is unreachable"),
        OSError(errno.EHOSTDOWN, "Host is down"),
    ],
)
def test_refused_and_unreachable_are_one_kind_of_look_nobody(error: OSError) -> None:
    assert nobody_listens("10.0.0.1", 6400, connect=failing(error))


@pytest.mark.parametrize(
    "error",
    [TimeoutError("timed out"), OSError(errno.EMFILE, "Too many open files"), socket.gaierror(-2, "Name unknown")],
)
def test_a_timeout_or_a_local_error_proves_nothing(error: OSError) -> None:
    assert not nobody_listens("10.0.0.1", 6400, connect=failing(error))


def test_a_real_refused_port_reads_as_nobody() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections to it are refused
        assert nobody_listens("127.0.0.1", port)
        s.listen()
        assert not nobody_listens("127.0.0.1", port)


class Looks:
    """A scripted GCS: each look pops the next answer (True: nobody there)."""

    def __init__(self, *nobody: bool) -> None:
        self.nobody = list(nobody)

    def __call__(self, record: HeadRecord) -> bool:
        return self.nobody.pop(0)


def test_one_look_that_finds_nobody_is_a_blip() -> None:
    watch = HeadWatch(Looks(True, False, True, False))
    assert [watch.look(record()) for _ in range(4)] == [Look.MISSED, Look.ANSWERS, Look.MISSED, Look.ANSWERS]


def test_a_head_is_dead_after_looks_in_a_row_that_find_nobody() -> None:
    assert DEAD_AFTER_LOOKS == 2
    watch = HeadWatch(Looks(True, True, True))
    assert [watch.look(record()) for _ in range(3)] == [Look.MISSED, Look.DEAD, Look.DEAD]


def test_an_answer_starts_the_count_again() -> None:
    watch = HeadWatch(Looks(True, False, True, True))
    assert [watch.look(record()) for _ in range(4)] == [Look.MISSED, Look.ANSWERS, Look.MISSED, Look.DEAD]


def test_another_head_or_a_refreshed_record_starts_the_count_again() -> None:
    watch = HeadWatch(Looks(True, True, True, True))
    assert watch.look(record(6400)) is Look.MISSED
    assert watch.look(record(6401)) is Look.MISSED, "another head: its own count"
    # A head that still refreshes its record is alive, whatever one look at its port says.
    assert watch.look(record(6401, updated=10)) is Look.MISSED
    assert watch.look(record(6401, updated=10)) is Look.DEAD


def test_refused_then_unreachable_counts_as_two_looks_in_a_row() -> None:
    errors = [ConnectionRefusedError(errno.ECONNREFUSED, "refused"), OSError(errno.EHOSTUNREACH, "No route")]

    def nobody_at(head: HeadRecord) -> bool:
        return nobody_listens(head.head_ip, head.gcs_port, connect=failing(errors.pop(0)))

    watch = HeadWatch(nobody_at)
    assert watch.look(record()) is Look.MISSED
    assert watch.look(record()) is Look.DEAD
