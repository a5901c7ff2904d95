from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tasks.attempts import Attempt
from tasks.choices import TaskState
from tasks.logs.curves import (
    TAIL,
    AttemptCurves,
    last_logged_step,
    merge_attempts,
    parse_file_log,
    parse_log,
    parse_text,
    read_attempt,
)
from tasks.models import Task
from tests.web.task_data import verl_log


def test_it_reads_verl_step_lines_with_prefixes_colours_and_numpy_values():
    curves = parse_text(
        "Total training steps: 100\n"
        "(TaskRunner pid=3165) step:71 - actor/entropy:0.119 - actor/pg_loss:np.float64(-0.00066)"
        " - critic/score/mean:0.636 - val-core/openai/gsm8k/reward/mean@1:0.5\n"
        "\x1b[36m(TaskRunner pid=3165)\x1b[0m step:72 - actor/entropy:0.118 - timing_s/gen:12\n"
    )
    assert curves.total_steps == 100
    assert curves.last_step == 72
    assert curves.series["actor/pg_loss"] == {71: -0.00066}
    assert curves.series["val-core/openai/gsm8k/reward/mean@1"] == {71: 0.5}
    assert curves.series["actor/entropy"] == {71: 0.119, 72: 0.118}


def test_a_repeated_line_gives_one_point_per_step():
    line = "(TaskRunner pid=1) step:3 - loss:0.5\n"
    curves = parse_text(line + line + "step:3 - loss:0.25\n")
    assert curves.to_json()["series"] == {"loss": [(3, 0.25)]}


def test_non_numeric_and_other_lines_are_skipped():
    curves = parse_text("step:1 - note:hello - loss:nan - ok:1.5\nstepping up: 3\nsome step:x - y:1\n")
    assert curves.series == {"ok": {1: 1.5}}


def test_a_log_is_read_in_chunks(tmp_path: Path):
    path = tmp_path / "driver.log"
    path.write_text("".join(f"filler line {i}\nstep:{i} - loss:{1 / i}\n" for i in range(1, 20001)))
    curves = parse_log(path)
    assert curves.last_step == 20000
    assert len(curves.series["loss"]) == 20000


def test_a_missing_log_has_no_curves(tmp_path: Path):
    assert parse_log(tmp_path / "nope.log").to_json() == {"last_step": None, "total_steps": None, "series": {}}


# ---- verl's file logger (verl/utils/tracking.py FileLogger: orjson, one line per logged step)


def file_log(path: Path, *entries: dict[str, object], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries) + tail)
    return path


def test_the_file_logger_gives_the_numeric_values_of_each_step(tmp_path: Path):
    path = file_log(
        tmp_path / "metrics.jsonl",
        {"step": 0, "data": {"val-core/openai/gsm8k/reward/mean@1": 0.21}},
        # orjson writes NaN as null; text and booleans the console would not print either.
        {"step": 1, "data": {"actor/pg_loss": -0.00066, "loss": None, "note": "hi", "ok": True, "n": 3}},
        {"step": 2, "data": {"actor/pg_loss": 2, "huge": 10**400}},
        tail='{"step":3,"data":{"actor/pg',  # a line cut short by a crash
    )
    curves = parse_file_log(path)
    assert curves is not None
    assert curves.series == {
        "val-core/openai/gsm8k/reward/mean@1": {0: 0.21},
        "actor/pg_loss": {1: -0.00066, 2: 2.0},
        "n": {1: 3.0},
    }
    assert curves.last_step == 2
    assert parse_file_log(tmp_path / "none.jsonl") is None


def test_an_attempt_with_a_file_logger_has_its_curves_from_the_file_only(tmp_path: Path):
    # The console printed the same steps (rounded by pformat); one point per step, the file's.
    log = tmp_path / "driver.log"
    log.write_text("Total training steps: 3\nstep:1 - loss:np.float64(0.5) - x:1\nstep:2 - loss:0.25\n")
    path = file_log(
        tmp_path / "metrics.jsonl",
        {"step": 1, "data": {"loss": 0.5000001}},
        {"step": 2, "data": {"loss": 0.25}},
        {"step": 3, "data": {"loss": 0.125}},  # Ray never passed step 3's console line on
    )
    curves = read_attempt(log, path)
    assert curves.to_json() == {
        "last_step": 3,
        "total_steps": 3,
        "series": {"loss": [(1, 0.5000001), (2, 0.25), (3, 0.125)]},
    }
    # Without the file: the console lines.
    assert read_attempt(log, tmp_path / "none.jsonl").to_json()["series"] == {
        "loss": [(1, 0.5), (2, 0.25)],
        "x": [(1, 1.0)],
    }


def test_a_run_without_a_console_has_its_curves_from_the_file(tmp_path: Path):
    log = tmp_path / "driver.log"
    log.write_text("Total training steps: 2\nwandb: Syncing run gsm8k\n")
    path = file_log(tmp_path / "metrics.jsonl", {"step": 1, "data": {"loss": 1}}, {"step": 2, "data": {"loss": 0.5}})
    assert read_attempt(log, path).to_json() == {
        "last_step": 2,
        "total_steps": 2,
        "series": {"loss": [(1, 1.0), (2, 0.5)]},
    }


def test_the_last_logged_step_is_read_from_the_files_end(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    assert last_logged_step(path) == (False, None)
    path.write_text("")
    assert last_logged_step(path) == (True, None)  # created as training started, nothing logged
    # Longer than the tail read: only its end is parsed, the cut first line skipped.
    entries = [{"step": n, "data": {"loss": 1 / n, "pad": "x" * 500}} for n in range(1, 5000)]
    file_log(path, *entries, tail='{"step":5000,"da')
    assert path.stat().st_size > 2 * TAIL
    assert last_logged_step(path) == (True, 4999)
    # One line longer than the tail: read whole.
    file_log(path, {"step": 1, "data": {}}, {"step": 2, "data": {"pad": "x" * (TAIL + 10)}})
    assert last_logged_step(path) == (True, 2)


# ---- Across attempts


def _attempt(number: int, log: str, resumed_from: int | None = None) -> AttemptCurves:
    return AttemptCurves(number, resumed_from, parse_text(log))


def test_a_step_logged_by_two_attempts_counts_once_and_the_later_wins():
    # Attempt 1 saved at step 3 and died after step 5; attempt 2 resumed from 3 and went on.
    first = _attempt(1, verl_log(range(1, 6)))
    second = _attempt(2, verl_log(range(4, 9), resumed_from=3), resumed_from=3)
    merged = merge_attempts([first, second])
    score = merged.curves.series["critic/score/mean"]
    assert sorted(score) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [score[step] for step in (3, 4, 5)] == [0.3, 0.9, 1.0]  # 4 and 5 are attempt 2's
    assert merged.curves.last_step == 8
    assert merged.curves.total_steps == 10


def test_the_later_attempt_replaces_the_whole_step_not_only_its_own_keys():
    # Attempt 1 validated at step 4; attempt 2 re-did step 4 without validating: the old
    # val point belongs to a thrown-away run.
    first = _attempt(1, "step:3 - loss:0.5\nstep:4 - loss:0.4 - val/score:0.7\n")
    second = _attempt(2, "step:4 - loss:0.45\n", resumed_from=3)
    merged = merge_attempts([first, second])
    assert merged.curves.series == {"loss": {3: 0.5, 4: 0.45}}


def test_the_validation_before_training_adds_to_the_step_it_starts_from():
    # verl validates before training: at step 0 from scratch, at the checkpoint's step after a
    # resume. That step was trained by the attempt that saved the checkpoint: its values stand.
    first = _attempt(1, "step:0 - val/score:0.1\nstep:1 - loss:0.5\nstep:2 - loss:0.4\nstep:3 - loss:0.3\n")
    second = _attempt(2, "step:2 - val/score:0.6\nstep:3 - loss:0.35\n", resumed_from=2)
    merged = merge_attempts([first, second])
    assert merged.curves.series == {"val/score": {0: 0.1, 2: 0.6}, "loss": {1: 0.5, 2: 0.4, 3: 0.35}}
    assert [(b.first_step, b.last_step) for b in merged.boundaries] == [(1, 3), (3, 3)]
    # An evaluation run trains no step.
    only = merge_attempts([_attempt(1, "Total training steps: 40\nstep:0 - val/score:0.1\n")])
    assert (only.curves.last_step, only.boundaries[0].first_step) == (0, None)


def test_the_boundaries_say_where_each_attempt_ran():
    merged = merge_attempts(
        [
            _attempt(1, verl_log(range(1, 6))),
            _attempt(2, verl_log(range(4, 9), resumed_from=3), resumed_from=3),
        ]
    )
    expected = [
        {"attempt_no": 1, "first_step": 1, "last_step": 5, "resumed_from_step": None},
        {"attempt_no": 2, "first_step": 4, "last_step": 8, "resumed_from_step": 3},
    ]
    assert [boundary.to_json() for boundary in merged.boundaries] == expected
    assert merged.to_json()["attempts"] == expected


def test_an_attempt_with_no_steps_has_a_boundary_and_changes_nothing():
    # Attempt 2 died waiting for GPUs before its first step; attempt 3 resumed from 5.
    merged = merge_attempts(
        [
            _attempt(1, verl_log(range(1, 6))),
            _attempt(2, "(TaskRunner pid=9) Total training steps: 10\nTotal available GPUs 0 is less than 4\n"),
            _attempt(3, verl_log(range(6, 8), resumed_from=5), resumed_from=5),
        ]
    )
    assert merged.boundaries[1].to_json() == {
        "attempt_no": 2,
        "first_step": None,
        "last_step": None,
        "resumed_from_step": None,
    }
    assert sorted(merged.curves.series["critic/score/mean"]) == [1, 2, 3, 4, 5, 6, 7]
    assert merged.curves.last_step == 7


def test_last_step_is_where_the_latest_attempt_is_not_how_far_an_earlier_one_got():
    # Attempt 2 resumed from 3 and is at step 4, while attempt 1 had reached 5 before it died.
    merged = merge_attempts(
        [_attempt(1, verl_log(range(1, 6))), _attempt(2, verl_log(range(4, 5), resumed_from=3), resumed_from=3)]
    )
    assert merged.curves.last_step == 4
    # A new attempt that has logged nothing yet leaves the step where the last one was.
    merged = merge_attempts([_attempt(1, verl_log(range(1, 6))), _attempt(2, "starting\n")])
    assert merged.curves.last_step == 5


def test_no_attempts_no_curves():
    assert merge_attempts([]).to_json() == {"last_step": None, "total_steps": None, "series": {}, "attempts": []}


# ---- In words


def _a(number: int, **fields: object) -> Attempt:
    return Attempt(attempt_no=number, ray_submission_id=f"t--a{number:02d}", **fields)


NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("attempt", "summary"),
    [
        (_a(2, resumed_from_step=40, start_time=NOW), "attempt 2 resumed from step 40"),
        (_a(3, resumed_from_step=0, start_time=NOW, end_time=NOW), "attempt 3 resumed from step 0"),
        (_a(1, resume_known=True, start_time=NOW), "attempt 1 started from scratch"),
        (_a(2, resume_known=True, start_time=NOW, end_time=NOW), "attempt 2 started from scratch"),
        # Running, and verl has not said yet: it may still load a checkpoint.
        (_a(2, start_time=NOW), "attempt 2 has not loaded a checkpoint yet"),
        (_a(1, start_time=NOW), "attempt 1 has not loaded a checkpoint yet"),
        (_a(1, start_time=NOW, end_time=NOW), "attempt 1 ended before verl said where it started"),
        (_a(2), "attempt 2 has not started yet"),
        (_a(2, end_time=NOW), "attempt 2 never started"),
    ],
)
def test_the_resume_in_words(attempt: Attempt, summary: str):
    assert attempt.resume_summary == summary


def _task(state: str, limit: int | None) -> Task:
    return Task(task_id="t", state=state, time_limit_s=limit, nnodes=1, n_gpus_per_node=1)


def test_time_left_counts_from_the_running_attempts_start():
    started = _a(2, start_time=NOW - timedelta(minutes=48))
    assert _task(TaskState.RUNNING, 7200).time_left_s(started, NOW) == 72 * 60
    assert _task(TaskState.RUNNING, 600).time_left_s(started, NOW) == 0  # past it: none left, never negative


@pytest.mark.parametrize(
    ("state", "limit", "attempt"),
    [
        (TaskState.RUNNING, None, _a(1, start_time=NOW)),  # no limit
        (TaskState.SUBMITTED, 3600, _a(1)),  # not started on Ray yet
        (TaskState.RUNNING, 3600, None),
        (TaskState.PENDING_RESOURCES, 3600, _a(1, start_time=NOW, end_time=NOW)),
        (TaskState.SUCCEEDED, 3600, _a(1, start_time=NOW, end_time=NOW)),
    ],
)
def test_no_time_left_without_a_limit_or_a_running_attempt(state: str, limit: int | None, attempt: Attempt | None):
    assert _task(state, limit).time_left_s(attempt, NOW) is None
