from __future__ import annotations

from pathlib import Path

from tasks.curves import parse_log, parse_text


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
