"""The stand-in's PPO trainer validates as verl 0.9.1's fit() does (trainer/ppo/v1/trainer_base.py):
before training (val_before_train, at the step it starts from), then at every test_freq-th step
and the last, in that step's own record, with verl's keys (val-core/<data_source>/<var>/mean@1,
val-aux/num_turns/*); the reward it reaches depends on its learning rate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tasks.logs.curves import parse_text

CORE = "val-core/openai/gsm8k/reward/mean@1"
AUX = ["val-aux/num_turns/min", "val-aux/num_turns/max", "val-aux/num_turns/mean"]


@pytest.fixture
def main_ppo(standin_verl: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module = standin_verl("verl.trainer.main_ppo")
    monkeypatch.setattr(module.ray, "get", lambda refs: refs)  # no workers here: nothing to wait for
    return module


class Recorded:
    """A Tracking that keeps what the trainer logs, as (step, data)."""

    def __init__(self) -> None:
        self.logged: list[tuple[int, dict[str, Any]]] = []

    def log(self, data: dict[str, Any], step: int) -> None:
        self.logged.append((step, data))


def fit(main_ppo: ModuleType, **config: str) -> list[tuple[int, dict[str, Any]]]:
    tracking = Recorded()
    settings = {"standin.steps": "6", "standin.step_s": "0", "trainer.resume_mode": "disable", **config}
    main_ppo.TaskRunner.fit(settings, "ppo", [], tracking)
    return tracking.logged


def validated(logged: list[tuple[int, dict[str, Any]]]) -> dict[int, float]:
    return {step: data[CORE] for step, data in logged if CORE in data}


def test_it_validates_before_training_and_at_each_test_freq_step_and_the_last(main_ppo) -> None:
    logged = fit(main_ppo, **{"trainer.test_freq": "4"})
    assert [step for step, _ in logged] == [0, 1, 2, 3, 4, 5, 6]
    assert list(validated(logged)) == [0, 4, 6]
    # Validation at step 4 is in step 4's own record, beside its training metrics.
    step_4 = dict(logged)[4]
    assert {"critic/score/mean", "actor/pg_loss", CORE, *AUX} <= step_4.keys()
    assert [int(step_4[key]) for key in AUX] == [2, 2, 2]
    # Before training: the validation alone.
    assert set(dict(logged)[0]) == {CORE, *AUX}


def test_without_test_freq_it_validates_only_before_training(main_ppo) -> None:
    assert list(validated(fit(main_ppo))) == [0]  # verl's test_freq default: -1
    assert validated(fit(main_ppo, **{"trainer.val_before_train": "False"})) == {}


def test_the_learning_rate_sets_how_fast_the_reward_climbs(main_ppo) -> None:
    curves = {
        lr: validated(fit(main_ppo, **{"trainer.test_freq": "2", "actor_rollout_ref.actor.optim.lr": lr}))
        for lr in ("1e-6", "1e-5", "1e-7", "1e-4")
    }
    assert curves["1e-6"] == {0: 0.2, 2: 0.486, 4: 0.771, 6: 1.0}  # verl's default: the best (at most 1)
    assert curves["1e-5"] == curves["1e-7"] == {0: 0.2, 2: 0.343, 4: 0.486, 6: 0.629}  # a decade off: half
    assert curves["1e-4"][6] < curves["1e-5"][6]
    assert validated(fit(main_ppo))[0] == 0.2  # before training every model is the same


def test_the_console_line_reads_back_as_argus_reads_it(main_ppo, capsys: pytest.CaptureFixture[str]) -> None:
    step_4 = dict(fit(main_ppo, **{"trainer.test_freq": "4"}))[4]
    main_ppo.Tracking("p", "e", ["console"]).log(step_4, step=4)
    series = parse_text(capsys.readouterr().out).series
    assert series[CORE] == {4: step_4[CORE]}
    assert series["val-aux/num_turns/mean"] == {4: 2.0}


def test_its_sft_trainer_logs_val_loss_in_a_record_of_its_own_at_each_test_freq_step_and_the_last(
    main_ppo, tmp_path: Path
) -> None:
    """verl 0.9.1's SFT fit() (sft_trainer.py): the step's training record, then with a val file the
    validation's {"val/loss"} alone, at every test_freq-th step and the last; none before training."""
    # SFT saves its last step: into tmp_path, not the working folder.
    settings = {
        "standin.steps": "6",
        "standin.step_s": "0",
        "trainer.resume_mode": "disable",
        "trainer.default_local_dir": str(tmp_path),
    }
    val = {"data.val_files": "/data/val.parquet"}

    def fit_sft(**config: str) -> list[tuple[int, dict[str, Any]]]:
        tracking = Recorded()
        main_ppo.TaskRunner.fit({**settings, **config}, "sft", [], tracking)
        return tracking.logged

    logged = fit_sft(**val, **{"trainer.test_freq": "4"})
    assert [step for step, _ in logged] == [1, 2, 3, 4, 4, 5, 6, 6]
    validations = [(step, data) for step, data in logged if "val/loss" in data]
    assert [step for step, _ in validations] == [4, 6] and all(set(data) == {"val/loss"} for _, data in validations)
    assert validations[1][1]["val/loss"] < validations[0][1]["val/loss"]  # it learns
    assert [step for step, data in fit_sft(**val) if "val/loss" in data] == [6]  # test_freq -1: the last only
    assert not any("val/loss" in data or CORE in data for _, data in fit_sft(**{"trainer.test_freq": "4"}))
