"""common.redact, the one redaction: owners' values and well-known credential shapes, in text,
bytes, JSON and streams cut anywhere (tasks.logs.task_redaction.served; its long lines:
tests/tasks/logs/test_log_redaction.py); and the job driver's use of it (raypool.driver)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from common.redact import REDACTED, SHAPES_ONLY, Redactor
from raypool.driver import main as driver_main
from raypool.driver import redactor_from
from tasks.logs.task_redaction import served

VALUE = "s3cr3t-value-of-alice"
HF = "hf_" + "A1b2C3d4E5" * 4
SK = "sk-proj-" + "Ab1_" * 12
WANDB = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        (f"token={HF} ok", f"token={REDACTED} ok"),
        (f"key: {SK}", f"key: {REDACTED}"),
        (f"WANDB_API_KEY={WANDB}", f"WANDB_API_KEY={REDACTED}"),
        (f'"WANDB_API_KEY": "{WANDB}"', f'"WANDB_API_KEY": "{REDACTED}"'),
        (f"export WANDB_API_KEY='{WANDB}'", f"export WANDB_API_KEY='{REDACTED}'"),
        # Not credentials: a git hash alone, a word holding "sk-", a short hf_ name.
        (f"commit {WANDB}", f"commit {WANDB}"),
        ("task-runner-1 disk-usage", "task-runner-1 disk-usage"),
        ("hf_home is set", "hf_home is set"),
    ],
)
def test_the_well_known_shapes_are_redacted(line: str, shown: str) -> None:
    assert SHAPES_ONLY.text(line) == shown
    assert SHAPES_ONLY.data(line.encode()) == shown.encode()


def test_an_owners_values_are_redacted_the_longest_first_and_short_ones_left() -> None:
    redact = Redactor([VALUE, VALUE + "-longer", "abc"])
    assert redact.text(f"a {VALUE}-longer b {VALUE} c abc") == f"a {REDACTED} b {REDACTED} c abc"
    assert redact.data(f"x{VALUE}y é".encode()) == f"x{REDACTED}y é".encode()


def test_values_with_regex_characters_are_taken_literally() -> None:
    value = "a.b*c(d)[e]+$"
    assert Redactor([value]).text(f"<{value}> aXb") == f"<{REDACTED}> aXb"


def test_json_is_redacted_in_every_string_keys_included() -> None:
    redact = Redactor([VALUE])
    document = {"message": f"said {VALUE}", "nested": [{VALUE: HF}], "n": 1, "none": None}
    assert redact.json(document) == {
        "message": f"said {REDACTED}",
        "nested": [{REDACTED: REDACTED}],
        "n": 1,
        "none": None,
    }


@pytest.mark.parametrize("size", [1, 3, 7, 64])
def test_a_stream_cut_anywhere_never_lets_a_value_through(size: int) -> None:
    text = f"step 1\nthe key is {VALUE} now\r{HF}\nlast {VALUE}".encode()
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    out = list(served(Redactor([VALUE]), chunks))
    assert b"".join(out) == f"step 1\nthe key is {REDACTED} now\r{REDACTED}\nlast {REDACTED}".encode()
    assert all(VALUE.encode() not in chunk for chunk in out)


def test_the_driver_redacts_the_values_its_environment_names_and_runs_the_trainer_with_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    monkeypatch.setenv("ARGUS_SECRET_NAMES", "MY_API_KEY,GONE_TOKEN")
    monkeypatch.setenv("MY_API_KEY", VALUE)
    monkeypatch.delenv("GONE_TOKEN", raising=False)
    log = tmp_path / "driver.log"
    trainer = (
        "import os, sys; print('key', os.environ['MY_API_KEY'], flush=True); "
        f"print('hf', {HF!r}, flush=True); sys.stdout.write('no newline ' + os.environ['MY_API_KEY'])"
    )
    assert driver_main(["--log", str(log), "--", sys.executable, "-c", trainer]) == 0
    written = log.read_bytes()
    shown = f"key {REDACTED}\nhf {REDACTED}\nno newline {REDACTED}".encode()
    assert written.startswith(shown) and VALUE.encode() not in written and HF.encode() not in written
    assert VALUE.encode() not in capfdbinary.readouterr().out  # Ray's own copy of the log


def test_the_driver_takes_values_only_from_the_variables_named() -> None:
    redact = redactor_from({"ARGUS_SECRET_NAMES": "A_KEY", "A_KEY": VALUE, "B_KEY": "other-value"})
    assert redact.values == [VALUE]
    assert redactor_from({}).values == []
