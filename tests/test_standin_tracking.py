"""The stand-in's Tracking (tests/standin/verl/utils/tracking.py) logs as verl 0.9.1's does: the
console's lines only when ``console`` is listed, the file logger's JSON lines where
VERL_FILE_LOGGER_PATH says, in the form Argus reads (tasks.logs.curves)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tasks.logs.curves import parse_file_log, parse_text


@pytest.fixture
def tracking(standin_verl: Callable[[str], ModuleType]) -> ModuleType:
    return standin_verl("verl.utils.tracking")


@pytest.mark.parametrize(
    ("value", "names"),
    [
        (None, ["console", "wandb"]),  # ppo_trainer.yaml's default
        ("['console','file']", ["console", "file"]),
        ('["wandb", "file"]', ["wandb", "file"]),
        ("[wandb]", ["wandb"]),
        ("console", ["console"]),
        ("[]", []),
    ],
)
def test_the_logger_list_is_read_as_hydra_gives_it(tracking: ModuleType, value: str | None, names: list[str]):
    assert tracking.backends(value) == names


def test_each_logger_only_when_listed(tracking: ModuleType, tmp_path: Path, monkeypatch, capsys):
    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    monkeypatch.setenv("WANDB_RUN_ID", "run-1")
    data = {"loss": np.float64(0.25), "n": 3, "bad": float("nan"), "note": "text"}

    both = tracking.Tracking("p", "e", ["console", "file"])
    both.log(data, step=1)
    printed = capsys.readouterr().out
    assert printed == f"Creating file logger at {path}\nstep:1 - loss:np.float64(0.25) - n:3 - bad:nan\n"
    # orjson's form: compact, numpy values as numbers, NaN as null.
    assert path.read_text() == '{"step":1,"data":{"loss":0.25,"n":3,"bad":null,"note":"text"}}\n'
    from_file = parse_file_log(path)
    assert from_file is not None
    assert parse_text(printed).series == from_file.series == {"loss": {1: 0.25}, "n": {1: 3.0}}

    tracking.Tracking("p", "e", ["wandb", "file"]).log(data, step=2)  # opened with "wb": truncated
    printed = capsys.readouterr().out
    assert "step:" not in printed and "View run at \x1b[34m\x1b[4mhttps://wandb.ai/standin/p/runs/run-1" in printed
    assert path.read_text().startswith('{"step":2,')

    with pytest.raises(AssertionError, match="nope is not supported"):
        tracking.Tracking("p", "e", ["nope"])


def test_without_a_path_the_file_goes_under_its_root(tracking: ModuleType, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    tracking.Tracking("proj", "exp", ["file"]).log({"x": 1}, step=0)
    assert (tmp_path / "proj" / "exp.jsonl").read_text() == '{"step":0,"data":{"x":1}}\n'
