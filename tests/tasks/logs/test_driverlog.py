"""driverlog on real logs: the stand-in's, captured on a real local Ray cluster
(tests/standin/logs/, see tests/standin/README.md), and real verl 0.9.1's (tests/fixtures/verl/).
Lines written by hand for a case no capture has are marked HAND-WRITTEN with what they copy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks.logs.driverlog import ResumeInfo, placement_stuck, resumed_from
from tasks.logs.logfile import read_new

ROOT = Path(__file__).resolve().parents[3]
STANDIN_LOGS = ROOT / "tests/standin/logs"
VERL_LOGS = sorted((ROOT / "tests/fixtures/verl").glob("*.log"))

# Ray's autoscaler in tests/standin/logs/starved.log (4 bundles of {"CPU": 4, "GPU": 1} on 14-CPU nodes).
STARVED = (
    "Error: No available node types can fulfill resource request defaultdict(<class 'float'>, "
    "{'CPU': 16.0, 'GPU': 4.0}). Add suitable node types to this cluster to resolve this issue."
)


def standin(name: str) -> str:
    return (STANDIN_LOGS / f"{name}.log").read_text()


# read_new


def test_it_reads_whole_lines_and_leaves_a_partial_one_for_next_time(tmp_path):
    log = tmp_path / "driver.log"
    log.write_bytes(b"step:1\nstep:")
    assert read_new(log, 0, 1024) == ("step:1\n", 7, True)
    assert read_new(log, 7, 1024) == ("", 7, True)  # it grew, but no whole line yet
    with log.open("ab") as f:
        f.write(b"2\n")
    assert read_new(log, 7, 1024) == ("step:2\n", 14, True)
    assert read_new(log, 14, 1024) == ("", 14, False)


def test_it_reads_no_more_than_max_bytes(tmp_path):
    log = tmp_path / "driver.log"
    log.write_bytes(b"123456789\n" * 3)
    assert read_new(log, 0, 25) == ("123456789\n" * 2, 20, True)
    assert read_new(log, 20, 25) == ("123456789\n", 30, True)


def test_a_line_longer_than_max_bytes_does_not_stop_the_reading_and_is_never_read_in_pieces(tmp_path):
    # No piece of it is a line of its own: a secret's value cut there would escape redaction,
    # which sees whole lines (tests/tasks/logs/test_log_redaction.py).
    log = tmp_path / "driver.log"
    log.write_bytes(b"x" * 30 + b"\nnext\n")
    assert read_new(log, 0, 10) == ("", 10, True)
    assert read_new(log, 10, 10) == ("", 20, True)
    assert read_new(log, 20, 100) == ("next\n", 36, True)
    assert read_new(log, 20, 11) == ("", 31, True)  # the long line's end and nothing whole after it
    assert read_new(log, 31, 11) == ("next\n", 36, True)


def test_a_progress_bar_redrawn_without_newline_counts_as_growth(tmp_path):
    # HAND-WRITTEN, in the shape of tqdm's "Training Progress" bar that verl redraws with \r.
    log = tmp_path / "driver.log"
    log.write_bytes(b"Training Progress:   0%|          | 0/8\rTraining Progress:  12%|#         | 1/8")
    assert read_new(log, 0, 1024) == ("", 0, True)


def test_a_file_that_shrank_is_read_again_from_its_start(tmp_path):
    log = tmp_path / "driver.log"
    log.write_bytes(b"new run\n")
    assert read_new(log, 500, 1024) == ("new run\n", 8, True)


def test_a_missing_file_gives_nothing_and_keeps_the_offset(tmp_path):
    assert read_new(tmp_path / "gone.log", 123, 1024) == ("", 123, False)


@pytest.mark.parametrize("path", VERL_LOGS, ids=lambda p: p.stem)
def test_a_real_verl_log_read_in_pieces_comes_back_whole(path):
    text, offset, pieces = "", 0, 0
    while True:
        new, offset, grew = read_new(path, offset, 4096)
        if not new:
            break
        assert len(new.encode()) <= 4096 and new.endswith("\n")
        text += new
        pieces += 1
    assert not grew
    assert text == path.read_bytes().decode()  # bytes: the logs hold \r, which read_text would turn into \n
    assert pieces >= len(path.read_bytes()) // 4096


# resumed_from


def test_a_first_run_says_it_trains_from_scratch():
    info = resumed_from(standin("ppo_first"))
    assert info == ResumeInfo(0, "Training from scratch")
    assert info.from_scratch


def test_a_resumed_run_says_the_step_it_goes_on_from():
    info = resumed_from(standin("ppo_second"))
    assert info == ResumeInfo(4, "Setting global step to 4")
    assert not info.from_scratch


def test_nothing_said_yet_is_not_from_scratch():
    text = standin("ppo_second")
    before = text[: text.index("Setting global step")]
    assert "Load from checkpoint folder" in before  # the line before it has come, not this one
    assert resumed_from(before) is None
    assert resumed_from(standin("starved")) is None  # never placed, never reached the trainer


def test_sft_says_where_it_resumed_in_its_own_words():
    info = resumed_from(standin("sft_second"))
    assert info == ResumeInfo(4, "Found latest checkpoint: /tmp/standin-cap/ck-sft/global_step_4 (step 4)")


def test_sft_from_scratch_says_nothing_and_its_first_step_tells():
    text = standin("sft_first")
    assert "scratch" not in text
    info = resumed_from(text)
    assert info is not None and info.from_scratch
    assert info.line.startswith("step:1 - ")


def test_a_first_metric_line_after_a_resume_tells_the_step():
    # HAND-WRITTEN: SFT with resume_mode=resume_path prints nothing about it; its steps go on at N+1.
    assert resumed_from("step:13 - train/loss:0.41 - train/lr:1e-05\n") == ResumeInfo(
        12, "step:13 - train/loss:0.41 - train/lr:1e-05"
    )


def test_validation_before_training_is_not_a_step():
    # Real, from the older verl log above, each line cut after its first keys: val_before_train
    # logs its metrics as step 0.
    text = "(TaskRunner pid=247607) step:0 - val-aux/char_count/reward/mean@1:0.121524201853759\n"
    assert resumed_from(text) is None
    step_1 = "step:1 - global_seqlen/min:159906 - global_seqlen/max:159906"
    assert resumed_from(f"{text}(TaskRunner pid=247607) {step_1}\n") == ResumeInfo(0, step_1)


@pytest.mark.parametrize("path", VERL_LOGS, ids=lambda p: p.stem)
def test_real_verl_logs_that_died_before_training_say_nothing(path):
    # Each died before fit(), where _load_checkpoint speaks (their config dumps carry
    # 'resume_mode': 'auto' and 'resume_from_path': None).
    assert resumed_from(path.read_text()) is None


def test_a_real_verl_log_from_an_older_release():
    # Real: lines of a verl run's log pasted in a public GitHub repository's notes (found through
    # the code index; older verl, whose actor was "TaskRunner").
    text = (
        "(TaskRunner pid=247607) Checkpoint tracker file does not exist: /workspace/verl/backend/char_count/"
        "checkpoints/verl_example/smol135m_grpo/latest_checkpointed_iteration.txt\n"
        "(TaskRunner pid=247607) Training from scratch\n"
        "(WorkerDict pid=249887) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 128, 'detokenize': False}\n"
    )
    assert resumed_from(text) == ResumeInfo(0, "Training from scratch")


def test_verl_091s_actor_name_and_colours_are_seen_through():
    # HAND-WRITTEN: verl's format strings (ray_trainer._load_checkpoint) behind verl 0.9.1's
    # "(TaskRunnerV1 pid=N)" prefix with Ray's colour codes, as in tests/fixtures/verl/nccl.log.
    text = (
        "\x1b[36m(TaskRunnerV1 pid=7706)\x1b[0m Load from checkpoint folder: /shared/ck/global_step_120\n"
        "\x1b[36m(TaskRunnerV1 pid=7706)\x1b[0m Setting global step to 120\n"
        "\x1b[36m(TaskRunnerV1 pid=7706)\x1b[0m Resuming from /shared/ck/global_step_120\n"
    )
    assert resumed_from(text) == ResumeInfo(120, "Setting global step to 120")


def test_other_words_about_scratch_are_not_the_answer():
    # HAND-WRITTEN from verl's format string: _load_checkpoint's warning when data.pt is missing
    # comes after "Setting global step to N" and does not undo it.
    text = (
        "(TaskRunner pid=1) Setting global step to 6\n"
        "(TaskRunner pid=1) Warning: No dataloader state found at /ck/global_step_6/data.pt, will start from scratch\n"
    )
    assert resumed_from(text) == ResumeInfo(6, "Setting global step to 6")


# placement_stuck


def test_the_autoscalers_error_is_the_line_to_quote():
    text = standin("starved")
    assert "\x1b[33m(autoscaler +4s)\x1b[0m Error: No available node types" in text  # as captured
    assert placement_stuck(text) == STARVED


def test_the_autoscalers_error_comes_again_while_the_run_waits():
    # Captured over 100 s: at +9s, +44s and +1m19s, each twice like every line Ray relays on a one-host cluster.
    text = standin("starved_long")
    times = re.findall(r"\(autoscaler (\+\w+)\)\x1b\[0m Error: No available node types", text)
    assert times == ["+9s", "+9s", "+44s", "+44s", "+1m19s", "+1m19s"]
    assert placement_stuck(text) == STARVED
    assert placement_stuck(text[: text.index("(autoscaler +44s)")]) == STARVED  # the first one is enough


def test_the_autoscalers_tip_alone_is_not_stuck():
    text = standin("starved")
    tip = "\n".join(line for line in text.splitlines() if "Tip: use `ray status`" in line)
    assert tip and placement_stuck(tip) is None


@pytest.mark.parametrize("name", ["ppo_first", "ppo_second", "sft_first", "sft_second", "stall", "busy"])
def test_runs_that_were_placed_are_not_stuck(name):
    assert placement_stuck(standin(name)) is None


@pytest.mark.parametrize("path", VERL_LOGS, ids=lambda p: p.stem)
def test_real_verl_failures_are_not_stuck(path):
    # tq_head_unschedulable among them: an ActorUnschedulableError ends that run by itself.
    assert placement_stuck(path.read_text()) is None


def test_a_placement_waiting_on_busy_resources_is_silent():
    # Captured: another job held 10 of the node's 14 CPUs; the stand-in's 12-CPU group waited
    # 75 s with not a line from Ray (the request fits the node, so the autoscaler has no error).
    text = standin("busy")
    assert placement_stuck(text) is None
    assert resumed_from(text) is None


def test_the_last_request_that_fits_nowhere_is_quoted():
    # HAND-WRITTEN: the captured line twice, the second with another request, as Ray repeats it.
    later = STARVED.replace("'CPU': 16.0", "'CPU': 20.0")
    text = f"\x1b[33m(autoscaler +4s)\x1b[0m {STARVED}\n\x1b[33m(autoscaler +35s)\x1b[0m {later}\n"
    assert placement_stuck(text) == later


# verl 0.9.1's default (v1) trainer says it through Python's logging ("%(levelname)s:%(asctime)s:%(message)s",
# verl/utils/logging_utils.py), under the TaskRunnerV1 prefix: the form of the real
# "INFO:2026-11-23 14:42:00,038:Total training steps: 2" line in tests/fixtures/verl/fail_fast.log.
# HAND-WRITTEN from trainer/ppo/v1/trainer_base.py _load_checkpoint (a real run on CPU dies at NCCL
# before it loads a checkpoint): logger.info(f"Resuming from {global_step_folder}, setting global step to {...}").
V1 = "\x1b[36m(TaskRunnerV1 pid=11168)\x1b[0m INFO:2026-11-23 14:42:00,038:"


def test_verl_v1_resume_and_scratch_lines_are_read():
    resumed = f"{V1}Resuming from /private/users/a/jobs/t/checkpoints/global_step_40, setting global step to 40\n"
    assert resumed_from(resumed) == ResumeInfo(
        40,
        "INFO:2026-11-23 14:42:00,038:Resuming from /private/users/a/jobs/t/checkpoints/global_step_40, "
        "setting global step to 40",
    )
    scratch = resumed_from(f"{V1}Training from scratch\n")
    assert scratch == ResumeInfo(0, "INFO:2026-11-23 14:42:00,038:Training from scratch")


def test_fully_async_resume_counts_its_checkpoint_not_its_global_step():
    # HAND-WRITTEN from experimental/fully_async_policy/fully_async_trainer.py: its global step is
    # version * trigger_parameter_sync_step + 1, the checkpoint folder's number is the version.
    text = (
        "(FullyAsyncTrainer pid=7) [FullyAsyncTrainer] Load from checkpoint folder: /c/global_step_6\n"
        "(FullyAsyncTrainer pid=7) [FullyAsyncTrainer] Setting global step to 25, current_param_version to 6\n"
        "(FullyAsyncTrainer pid=7) [FullyAsyncTrainer] Resuming from  /c/global_step_6\n"
    )
    info = resumed_from(text)
    assert info is not None and info.step == 6


def test_validation_before_training_at_the_resumed_step_does_not_tell():
    # verl validates before training (val_before_train) and logs it at the step it starts from: after a
    # resume from 40 that is "step:40 - val-…"; only the first training line, step 41, says where it began.
    text = "step:40 - val-core/gsm8k/reward/mean@1:0.5\nstep:41 - actor/pg_loss:0.1 - val-core/x:0.2\n"
    assert resumed_from(text) == ResumeInfo(40, "step:41 - actor/pg_loss:0.1 - val-core/x:0.2")
