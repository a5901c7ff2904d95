from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tasks.logs.curves import AttemptCurves, merge_attempts, parse_log, parse_text
from tasks.models import Attempt, Task, TaskState
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
