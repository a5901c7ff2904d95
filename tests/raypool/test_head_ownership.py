"""Two heads with one cluster name never fight over head.json: ``judge`` and two ``HeadNode``s
sharing one head file, with stand-ins for Ray and the probes and one clock the test moves (no
sleeping). The real thing, with Ray and supervisord, is test_two_heads.py."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from raypool.config import NodeConfig
from raypool.discovery import HeadRecord, read_head, write_head
from raypool.headnode import HeadNode, judge
from raypool.probe import HeadWatch
from tests.raypool.test_watchdog import FakeRayProcess

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
TTL_S = 60
REFRESH_S = 10


def config_for(tmp_path: Path, port: int) -> NodeConfig:
    return NodeConfig.from_env(
        {
            "ARGUS_SHARED_ROOT": str(tmp_path),
            "ARGUS_CLUSTER_NAME": "c",
            "ARGUS_RAY_PORT": str(port),
            "ARGUS_DASHBOARD_PORT": str(port + 1900),
            "ARGUS_REFRESH_S": str(REFRESH_S),
            "ARGUS_TTL_S": str(TTL_S),
        }
    )


def other(head_id: str = "other", port: int = 6400, age_s: float = 0) -> HeadRecord:
    return HeadRecord.new(
        cluster_name="c",
        head_ip="10.0.0.1",
        gcs_port=port,
        dashboard_port=8300,
        ttl_s=TTL_S,
        now=T0 - timedelta(seconds=age_s),
        head_id=head_id,
    )


def watch(*nobody: bool) -> HeadWatch:
    looks = list(nobody)
    return HeadWatch(lambda record: looks.pop(0))


# --- the decision ---------------------------------------------------------------------------


def test_a_missing_record_is_free() -> None:
    assert judge(None, "me", watch(), T0).ours


def test_its_own_record_is_ours_without_looking() -> None:
    assert judge(other("me"), "me", watch(), T0).ours


def test_a_stale_record_of_another_head_may_be_taken_over() -> None:
    verdict = judge(other(age_s=TTL_S + 1), "me", watch(), T0)
    assert verdict.ours
    assert "10.0.0.1:6400 (head_id other) has expired" in verdict.why


def test_a_fresh_record_of_another_head_that_answers_is_not_ours() -> None:
    verdict = judge(other(age_s=TTL_S - 1), "me", watch(False), T0)
    assert not verdict.ours
    assert verdict.why == "head.json names another head, 10.0.0.1:6400 (head_id other), which answers"


def test_a_record_without_a_head_id_is_nobodys_own() -> None:
    # Written by an older head or by hand: it may name our address and still be another head.
    assert not judge(other(""), "", watch(False), T0).ours


def test_a_fresh_record_of_a_head_nobody_answers_at_is_taken_only_after_two_looks() -> None:
    looks = watch(True, True)
    first = judge(other(), "me", looks, T0)
    assert not first.ours and "did not answer one look" in first.why
    second = judge(other(), "me", looks, T0 + timedelta(seconds=REFRESH_S))
    assert second.ours and "nobody answered at the GCS of 10.0.0.1:6400 (head_id other) 2 looks in a row" in second.why


# --- two heads, one head file ----------------------------------------------------------------


class Pair:
    """Head "first" on port 6400 and head "second" on 6401, one head file, one clock."""

    def __init__(self, tmp_path: Path) -> None:
        self.now = 0.0
        self.answers = {"first": True, "second": True}  # does the head answer its own probe
        self.nobody = {6400: False, 6401: False}  # does a look at its GCS find nobody
        self.launched: dict[str, list[FakeRayProcess]] = {"first": [], "second": []}
        self.taken: set[int] = set()  # ports of this host some process holds
        self.first = self.head(tmp_path, "first", 6400)
        self.second = self.head(tmp_path, "second", 6401)
        self.head_file = self.first.config.head_file
        assert self.second.config.head_file == self.head_file

    def head(self, tmp_path: Path, name: str, port: int) -> HeadNode:
        def launch(args: Sequence[str]) -> FakeRayProcess:
            self.launched[name].append(FakeRayProcess(args))
            return self.launched[name][-1]

        return HeadNode(
            config_for(tmp_path, port),
            "10.0.0.1",
            launch=launch,
            probe=lambda record: self.answers[name],
            nobody_at=lambda record: self.nobody[record.gcs_port],
            port_taken=lambda port: port in self.taken,
            head_id=name,
            wall_clock=lambda: T0 + timedelta(seconds=self.now),
        )

    def run(self, seconds: float, *heads: HeadNode, step: float = 0.5) -> list[str | None]:
        """Tick ``heads`` (default both) for ``seconds``; the owner of head.json at each step."""
        owners = []
        end = self.now + seconds
        while self.now < end:
            for node in heads or (self.first, self.second):
                assert node.tick(self.now) is None
            record = read_head(self.head_file)
            owners.append(
                record.head_id if record is not None and record.is_fresh(T0 + timedelta(seconds=self.now)) else None
            )
            self.now += step
        return owners

    def owner(self) -> str | None:
        record = read_head(self.head_file)
        return record.head_id if record is not None else None


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    return Pair(tmp_path)


def test_a_second_head_stands_by_while_the_first_refreshes(pair: Pair, caplog: pytest.LogCaptureFixture) -> None:
    pair.run(5, pair.first)
    assert pair.owner() == "first"
    published = read_head(pair.head_file)
    assert published is not None
    with caplog.at_level(logging.WARNING, logger="raypool.headnode"):
        owners = pair.run(10 * TTL_S)
    assert set(owners) == {"first"}, "head.json never names the second head, never goes stale"
    assert pair.launched["second"] == [], "a head standing by starts no Ray"
    assert len(pair.launched["first"]) == 1 and not pair.launched["first"][0].stopped
    refreshed = read_head(pair.head_file)
    assert refreshed is not None and refreshed.updated_at >= published.updated_at + timedelta(seconds=9 * TTL_S)
    standby = [r.getMessage() for r in caplog.records if "standing by" in r.getMessage()]
    assert standby, "the second head says why it waits"
    assert "head.json names another head, 10.0.0.1:6400 (head_id first), which answers" in standby[0]
    assert "This head (second) takes over once that record expires" in standby[0]
    # Said again now and then, not on every look.
    assert 5 <= len(standby) <= 12


def test_a_standby_takes_over_once_the_first_heads_record_expires(pair: Pair) -> None:
    pair.run(5, pair.first)
    pair.answers["first"] = False  # its Ray hangs: it stops refreshing; the port stays open
    owners = pair.run(TTL_S + 2 * REFRESH_S)
    assert owners[: int(TTL_S / 0.5) - 15] == ["first"] * (int(TTL_S / 0.5) - 15), "a fresh record is not taken"
    assert pair.owner() == "second" and len(pair.launched["second"]) == 1
    # The first head recovers: it finds another live head's record and yields instead of fighting.
    pair.answers["first"] = True
    owners = pair.run(5 * TTL_S)
    assert set(owners) == {"second"}
    assert pair.launched["first"][0].stopped and len(pair.launched["first"]) == 1
    assert pair.first.ray is None and not pair.first.published


def test_a_head_restarted_in_place_takes_over_its_dead_predecessors_fresh_record(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.run(5, pair.first)
    # The first head's process is SIGKILLed (no withdraw); a new process comes up on the same
    # address with a new head_id. Nobody listens at the old GCS any more.
    pair.nobody[6400] = True
    restarted = pair.head(tmp_path, "restarted", 6400)
    pair.launched["restarted"] = []
    pair.answers["restarted"] = True
    pair.run(REFRESH_S - 1, restarted)
    assert pair.launched["restarted"] == [], "one look finding nobody is a blip"
    pair.nobody[6400] = False  # its own Ray answers there from now on
    pair.run(2, restarted)
    assert pair.launched["restarted"] == [] and pair.owner() == "first", "the old head answered again"
    pair.nobody[6400] = True
    started = pair.now
    while not pair.launched["restarted"]:
        pair.run(0.5, restarted)
    assert pair.now - started <= 2 * REFRESH_S + 1, "two looks that find nobody: it starts Ray"
    assert pair.owner() == "first", "not published before its own Ray answers"
    # Its own Ray now answers at the address the old record names: that must not read as the
    # old head being alive again.
    pair.nobody[6400] = False
    owners = pair.run(3 * TTL_S, restarted)
    assert set(owners[2:]) == {"restarted"}
    assert len(pair.launched["restarted"]) == 1 and not pair.launched["restarted"][0].stopped


def test_two_heads_starting_at_once_end_with_one(pair: Pair) -> None:
    # Both find head.json free and start Ray; the first to answer publishes, the other yields.
    pair.answers["second"] = False
    pair.run(1)
    assert len(pair.launched["first"]) == len(pair.launched["second"]) == 1
    assert pair.owner() == "first"
    pair.answers["second"] = True
    owners = pair.run(3 * TTL_S)
    assert set(owners) == {"first"}
    assert pair.launched["second"][0].stopped and pair.second.ray is None
    assert len(pair.launched["second"]) == 1, "and stands by, without starting Ray again"


def test_a_stopping_head_leaves_a_record_at_its_own_address_by_another_head_alone(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.run(1, pair.first)
    successor = HeadRecord.new(
        cluster_name="c", head_ip="10.0.0.1", gcs_port=6400, dashboard_port=8300, ttl_s=TTL_S, head_id="restarted"
    )
    write_head(pair.head_file, successor)
    pair.first.stop()
    assert read_head(pair.head_file) == successor
    assert pair.launched["first"][0].stopped


def test_a_head_restarted_in_place_waits_for_its_old_rays_ports(tmp_path: Path) -> None:
    # The old Ray drains for up to 30 s after its GCS is gone, its dashboard still bound: Ray
    # started then runs without a job server and is never published (seen in test_two_heads).
    pair = Pair(tmp_path)
    pair.taken = {pair.first.config.dashboard_port}
    pair.run(5, pair.first)
    assert pair.launched["first"] == [] and pair.owner() is None
    pair.taken = set()
    pair.run(1, pair.first)
    assert len(pair.launched["first"]) == 1 and pair.owner() == "first"
