"""Sweep documents: trial expansion (grid order, random reproducibility), the trials' specs, and
every refusal a 400 names by its field."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from tasks.specs import hydra_argv
from tasks.specs.advanced import command_argv
from tasks.specs.errors import SpecError
from tasks.sweeps.document import SweepDocument, is_sweep_document, parse_sweep
from tests.conftest import PIPELINE, PPO_SPEC, TRAIN

pytestmark = pytest.mark.django_db

LR = "actor_rollout_ref.actor.optim.lr"
BATCH = "data.train_batch_size"
KL = "algorithm.kl_ctrl.kl_coef"
BASE = {"workload": "grpo", "model_id": "Qwen/Qwen2.5-0.5B-Instruct", **TRAIN}
ADVANCED_BASE: dict[str, Any] = {
    "kind": "advanced",
    "workload": "grpo",
    "nnodes": 1,
    "n_gpus_per_node": 4,
    "command": (
        "python3 -m verl.trainer.main_ppo \\\n"
        "  data.train_files=$HOME/common/datasets/gsm8k/train.parquet \\\n"
        "  trainer.nnodes=1 trainer.n_gpus_per_node=4 \\\n"
        "  trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR \\\n"
        "  +ray_kwargs.ray_init.address=auto\n"
    ),
}


def sweep(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"name": "lr-sweep", "base": BASE, "grid": {LR: [1.0e-6, 3.0e-6]}}
    document.update(changes)
    return {key: value for key, value in document.items() if value is not ...}


def parse(document: dict[str, Any], user) -> SweepDocument:
    return parse_sweep(yaml.safe_dump(document, sort_keys=False), user=user)


def refusals(document: dict[str, Any], user) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse(document, user)
    return caught.value.fields


# --- Expansion ------------------------------------------------------------------------------------


def test_a_grid_expands_with_the_first_keys_values_outermost(alice, datasets: Path) -> None:
    document = parse(sweep(grid={LR: [1.0e-6, 3.0e-6, 1.0e-5], BATCH: [256, 512]}), alice)
    assert [trial.index for trial in document.trials] == list(range(6))
    assert [trial.params for trial in document.trials] == [
        {LR: 1.0e-6, BATCH: 256},
        {LR: 1.0e-6, BATCH: 512},
        {LR: 3.0e-6, BATCH: 256},
        {LR: 3.0e-6, BATCH: 512},
        {LR: 1.0e-5, BATCH: 256},
        {LR: 1.0e-5, BATCH: 512},
    ]
    # A Hydra key is an override of the trial's verl command, in the grid's key order.
    assert document.trials[3].parsed.resolved.overrides == (f"{LR}=3e-06", f"{BATCH}=512")
    assert (document.name, document.max_concurrent, document.metric, document.early_stop) == ("lr-sweep", None, "", {})


def test_each_keys_values_keep_the_order_given(alice, datasets: Path) -> None:
    document = parse(sweep(grid={BATCH: [512, 128, 256]}), alice)
    assert [trial.params[BATCH] for trial in document.trials] == [512, 128, 256]


def test_a_spec_key_sets_the_trials_spec_and_the_bases_overrides_stay_first(alice, datasets: Path) -> None:
    base = {**BASE, "overrides": [f"{KL}=0.001"]}
    document = parse(sweep(base=base, grid={"n_gpus_per_node": [2, 4], LR: [1e-6]}), alice)
    assert [trial.parsed.resolved.n_gpus_per_node for trial in document.trials] == [2, 4]
    assert document.trials[0].parsed.resolved.overrides == (f"{KL}=0.001", f"{LR}=1e-06")
    # Each trial's spec as sent is its own: what its task keeps (spec_raw).
    assert yaml.safe_load(document.trials[1].parsed.raw)["n_gpus_per_node"] == 4


def test_an_advanced_bases_trials_get_the_override_in_their_command(alice, datasets: Path) -> None:
    document = parse(sweep(base=ADVANCED_BASE, grid={LR: [1e-6, 1e-5], "max_retries": [1]}), alice)
    command = document.trials[1].parsed.resolved.command
    assert command is not None
    read = command_argv(command)
    assert read is not None and read[1].values(LR) == [1e-5]
    assert document.trials[1].parsed.resolved.max_retries == 1


@pytest.mark.parametrize("base", [BASE, ADVANCED_BASE], ids=["basic", "advanced"])
def test_a_swept_string_reaches_hydra_as_that_string(alice, datasets: Path, base: dict[str, Any]) -> None:
    # Bare, "true" and "null" read as a bool and null, "1e-6" a float, "[1,2]" a list, "a,b" a
    # sweep (refused), a space or a quote break the override: the trial's params would not say
    # what it ran with.
    values = ["true", "null", "1e-6", "[1,2]", "a,b", "x y", "it's", 'say "hi"', "Qwen/Qwen2.5-0.5B", 0.5, True]
    document = parse(sweep(base=base, grid={"+trainer.note": values}), alice)
    for trial, value in zip(document.trials, values, strict=True):
        resolved = trial.parsed.resolved
        read = (
            command_argv(resolved.command) if resolved.command else (None, hydra_argv.parse(list(resolved.overrides)))
        )
        assert read is not None and read[1].values("trainer.note") == [value], trial.params


def test_values_equal_in_python_but_of_other_types_are_other_trials(alice, datasets: Path) -> None:
    # True == 1 == 1.0 in Python; Hydra reads true, 1 and 1.0 as a bool, an int and a float.
    document = parse(sweep(grid={"+trainer.note": [1, True, 1.0, 0, False]}), alice)
    assert [trial.parsed.resolved.overrides[-1] for trial in document.trials] == [
        f"+trainer.note={value}" for value in ("1", "true", "1.0", "0", "false")
    ]


@pytest.mark.parametrize("base", [{**BASE, "overrides": ["+trainer.note=a"]}, ADVANCED_BASE], ids=["basic", "advanced"])
def test_a_swept_plus_key_the_base_sets_already_is_refused(alice, datasets: Path, base: dict[str, Any]) -> None:
    # Hydra's `+` adds a key the config lacks; after the base's own it fails every trial at its start.
    key = "trainer.note" if "overrides" in base else "ray_kwargs.ray_init.address"
    assert refusals(sweep(base=base, grid={f"+{key}": ["b", "c"]}), alice) == {
        f"grid.+{key}": [f"the base sets {key} already: sweep ++{key} or {key}"]
    }
    assert [t.params for t in parse(sweep(base=base, grid={f"++{key}": ["b"]}), alice).trials] == [{f"++{key}": "b"}]


def test_random_samples_are_drawn_again_the_same_from_the_same_seed(alice, datasets: Path) -> None:
    space = {
        LR: {"loguniform": [1.0e-7, 1.0e-5]},
        KL: {"uniform": [0.0, 0.01]},
        BATCH: {"randint": [128, 512]},
        "actor_rollout_ref.rollout.n": {"choice": [4, 8]},
    }
    document = sweep(grid=..., random={"samples": 8, "seed": 1, "space": space})
    first = [trial.params for trial in parse(document, alice).trials]
    again = [trial.params for trial in parse_sweep(json.loads(json.dumps(document)), user=alice).trials]
    other = [
        trial.params for trial in parse(sweep(grid=..., random={"samples": 8, "seed": 2, "space": space}), alice).trials
    ]
    assert first == again and first != other
    assert len(first) == 8 and [list(params) for params in first] == [list(space)] * 8
    for params in first:
        assert 1.0e-7 <= params[LR] <= 1.0e-5 and 0.0 <= params[KL] <= 0.01
        assert isinstance(params[BATCH], int) and 128 <= params[BATCH] <= 512
        assert params["actor_rollout_ref.rollout.n"] in (4, 8)
        assert params[LR] == float(f"{params[LR]:.6g}")  # 6 significant digits, as a person reads them
    # Spread over orders of magnitude, not crowded at the top as a uniform draw would be.
    assert min(math.log10(params[LR]) for params in first) < -6


def test_early_stop_and_the_cap_are_kept(alice, datasets: Path) -> None:
    early = {"metric": "val-core/openai/gsm8k/acc/mean@1", "mode": "min", "min_steps": 10, "eta": 3}
    validating = {**BASE, "test_freq": 5}
    document = parse(sweep(base=validating, max_concurrent=2, early_stop=early), alice)
    assert (document.max_concurrent, document.metric, document.mode) == (2, early["metric"], "min")
    assert document.early_stop == {"min_steps": 10, "eta": 3}
    defaults = parse(sweep(base=validating, early_stop={"metric": "val-aux/num_turns/mean", "min_steps": 5}), alice)
    assert (defaults.mode, defaults.early_stop) == ("max", {"min_steps": 5, "eta": 2})
    # A metric alone compares the trials (the best trial) and stops none: no validation needed.
    compared = parse(sweep(early_stop={"metric": "val-aux/num_turns/mean", "mode": "min"}), alice)
    assert (compared.metric, compared.early_stop) == ("val-aux/num_turns/mean", {})
    # A training metric is logged every step: no validation needed either.
    trained = parse(sweep(early_stop={"metric": "critic/score/mean", "min_steps": 5}), alice)
    assert trained.early_stop == {"min_steps": 5, "eta": 2}


def test_early_stopping_on_a_validation_metric_needs_validation_while_training(alice, datasets: Path) -> None:
    early = {"metric": "val-core/openai/gsm8k/acc/mean@1", "min_steps": 10}
    problems = refusals(sweep(early_stop=early), alice)
    assert list(problems) == ["base.test_freq"]
    assert problems["base.test_freq"][0].startswith("must be set for early_stop on val-core/openai/gsm8k/acc/mean@1")
    assert problems["base.test_freq"][0].endswith("(every trial)")
    # Swept, the trials that never validate are named by it.
    problems = refusals(sweep(grid={"test_freq": [5, -1]}, early_stop=early), alice)
    assert list(problems) == ["grid.test_freq"] and problems["grid.test_freq"][0].startswith("trial 1 (test_freq=-1)")


def test_an_advanced_trial_must_validate_while_it_trains_too(alice, datasets: Path) -> None:
    """An advanced command without trainer.test_freq leaves verl's -1: every trial's value at every
    rung would be its step-0 validation, all tied, and early stopping would silently stop none."""
    early = {"metric": "val-core/openai/gsm8k/acc/mean@1", "min_steps": 10}
    problems = refusals(sweep(base=ADVANCED_BASE, early_stop=early), alice)
    assert list(problems) == ["base.command"]
    assert problems["base.command"][0].startswith("must set trainer.test_freq to a positive number of steps")
    assert problems["base.command"][0].endswith("(every trial)")
    # Swept as a Hydra override: the trial that sets 0 is named; the one that validates every 5 goes on.
    problems = refusals(sweep(base=ADVANCED_BASE, grid={"trainer.test_freq": [5, 0]}, early_stop=early), alice)
    assert list(problems) == ["base.command"] and problems["base.command"][0].startswith(
        "trial 1 (trainer.test_freq=0)"
    )
    validating = {**ADVANCED_BASE, "command": ADVANCED_BASE["command"].rstrip() + " trainer.test_freq=5\n"}
    assert len(parse(sweep(base=validating, early_stop=early), alice).trials) == 2
    # A basic test_freq of 0 never validates either (verl: test_freq > 0).
    problems = refusals(sweep(grid={"test_freq": [5, 0]}, early_stop=early), alice)
    assert list(problems) == ["grid.test_freq"] and problems["grid.test_freq"][0].startswith("trial 1 (test_freq=0)")


def test_a_first_rung_past_every_trials_last_step_is_refused(alice, datasets: Path) -> None:
    early = {"metric": "val-core/openai/gsm8k/acc/mean@1", "min_steps": 10}
    short = {**BASE, "test_freq": 5, "total_training_steps": 8}
    problems = refusals(sweep(base=short, early_stop=early), alice)
    assert list(problems) == ["early_stop.min_steps"]
    assert problems["early_stop.min_steps"][0].startswith(
        "is past every trial's last step (total_training_steps at most 8): no trial would reach a rung"
    )
    command = ADVANCED_BASE["command"].rstrip() + " trainer.test_freq=5 trainer.total_training_steps=8\n"
    assert list(refusals(sweep(base={**ADVANCED_BASE, "command": command}, early_stop=early), alice)) == [
        "early_stop.min_steps"
    ]
    # One trial that reaches it is enough, and so is one whose epochs set its steps.
    assert len(parse(sweep(base=short, grid={"total_training_steps": [8, 20]}, early_stop=early), alice).trials) == 2
    assert len(parse(sweep(base={**BASE, "test_freq": 5}, early_stop=early), alice).trials) == 2


def test_a_validation_metric_verls_trainer_never_logs_is_refused(alice, datasets: Path) -> None:
    """A typo, or SFT's val/loss on a GRPO sweep: its trials would log no such metric, and the sweep
    would judge and rank none of them without a word."""
    validating = {**BASE, "test_freq": 5}
    for metric in ("val/loss", "val_core/openai/gsm8k/reward/mean@1", "val-core/reward", "val-score/openai/gsm8k"):
        problems = refusals(sweep(base=validating, early_stop={"metric": metric, "min_steps": 10}), alice)
        assert list(problems) == ["early_stop.metric"], metric
        assert problems["early_stop.metric"][0].startswith("verl's PPO trainer names its validation metrics")
    sft = {**BASE, "workload": "sft", "test_freq": 5}
    sft.pop("reward_function", None)
    problems = refusals(sweep(base=sft, early_stop={"metric": "val-core/openai/gsm8k/reward/mean@1"}), alice)
    assert problems == {"early_stop.metric": ["verl's SFT trainer logs its validation as val/loss only"]}
    assert parse(sweep(base=sft, early_stop={"metric": "val/loss", "mode": "min", "min_steps": 10}), alice).metric
    # Training metrics are not checked (another trainer's names are its own: test_examples' demo sweep).
    assert parse(sweep(early_stop={"metric": "critic/score/mean"}), alice).metric


def test_is_sweep_document_tells_a_sweep_from_a_spec_and_a_pipeline() -> None:
    assert is_sweep_document(yaml.safe_dump(sweep()))
    assert is_sweep_document(sweep(base=...))  # a sweep that lacks its base is still one: its 400 says so
    assert not is_sweep_document(PPO_SPEC)
    assert not is_sweep_document(yaml.safe_dump(PIPELINE))
    assert not is_sweep_document("base: [unclosed")


# --- Refusals -------------------------------------------------------------------------------------


def test_more_trials_than_the_site_allows_is_refused(alice, datasets: Path, settings) -> None:
    settings.ARGUS_SWEEP_MAX_TRIALS = 4
    problems = refusals(sweep(grid={LR: [1e-6, 2e-6, 3e-6], BATCH: [128, 256]}), alice)
    assert problems == {"grid": ["makes 6 trials; at most 4 (ARGUS_SWEEP_MAX_TRIALS)"]}
    space = {LR: {"loguniform": [1e-7, 1e-5]}}
    problems = refusals(sweep(grid=..., random={"samples": 5, "space": space}), alice)
    assert "from 1 to 4 (ARGUS_SWEEP_MAX_TRIALS)" in problems["random.samples"][0]


def test_the_default_maximum_is_256(alice, datasets: Path) -> None:
    grid = {LR: list(range(1, 17)), BATCH: list(range(1, 18))}  # 272 combinations
    assert refusals(sweep(grid=grid), alice) == {"grid": ["makes 272 trials; at most 256 (ARGUS_SWEEP_MAX_TRIALS)"]}


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"grid": {}}, "grid", "one or more keys"),
        ({"grid": {LR: []}}, f"grid.{LR}", "one or more values"),
        ({"grid": {LR: 1e-6}}, f"grid.{LR}", "one or more values"),
        ({"grid": {LR: [1e-6, 1e-6]}}, f"grid.{LR}", "more than once"),
        ({"grid": {LR: [[1e-6, 2e-6]]}}, f"grid.{LR}", "numbers, strings or booleans"),
        ({"grid": {"lr rate": [1]}}, "grid.lr rate", "neither a spec key nor a Hydra key"),
        ({"grid": {"after": [["x"]]}}, "grid.after", "wait only for its max_concurrent"),
        ({"random": {"samples": 2, "space": {LR: {"uniform": [0, 1]}}}}, "random", "not both"),
        ({"grid": ...}, "grid", "is required"),
        ({"repeat": 3}, "repeat", "unknown key"),
        ({"name": "lr sweep"}, "name", "up to 64 letters"),
        ({"base": ...}, "base", "is required"),
        ({"base": "ppo"}, "base", "must be a task spec"),
        ({"base": {**BASE, "after": ["alice-ppo-1"]}}, "base.after", "wait only for its max_concurrent"),
        ({"base": {**BASE, "after_any": ["alice-ppo-1"]}}, "base.after_any", "wait only for its max_concurrent"),
        ({"max_concurrent": 0}, "max_concurrent", "from 1 to 256"),
        ({"max_concurrent": "2"}, "max_concurrent", "integer"),
        ({"max_concurrent": True}, "max_concurrent", "integer"),
        ({"early_stop": "val/loss"}, "early_stop", "must be a mapping"),
        ({"early_stop": {"mode": "max"}}, "early_stop.metric", "name of a metric"),
        ({"early_stop": {"metric": "val loss"}}, "early_stop.metric", "name of a metric"),
        ({"early_stop": {"metric": "val/loss", "mode": "up"}}, "early_stop.mode", "max or min"),
        ({"early_stop": {"metric": "val/loss", "min_steps": 0}}, "early_stop.min_steps", "from 1"),
        ({"early_stop": {"metric": "val/loss", "min_steps": 5, "eta": 1}}, "early_stop.eta", "from 2 to 100"),
        ({"early_stop": {"metric": "val/loss", "min_steps": 5, "eta": 1.5}}, "early_stop.eta", "integer"),
        ({"early_stop": {"metric": "val/loss", "eta": 3}}, "early_stop.eta", "needs min_steps"),
        ({"early_stop": {"metric": "val/loss", "patience": 3}}, "early_stop.patience", "unknown key"),
    ],
)
def test_a_bad_document_names_the_field(alice, datasets: Path, changes, field: str, words: str) -> None:
    problems = refusals(sweep(**changes), alice)
    assert any(words in message for message in problems[field]), problems


@pytest.mark.parametrize(
    ("space", "words"),
    [
        ({"loguniform": [0, 1e-5]}, "0 < lo < hi"),
        ({"uniform": [1, 1]}, "lo < hi"),
        ({"uniform": [0, "1"]}, "two numbers"),
        ({"randint": [1, 2.5]}, "two integers"),
        ({"randint": [5, 1]}, "at most its hi"),
        ({"choice": []}, "one or more values"),
        ({"normal": [0, 1]}, "must be one of"),
        ({"uniform": [0, 1], "choice": [1]}, "must be one of"),
    ],
)
def test_a_bad_distribution_names_its_key(alice, datasets: Path, space: dict[str, Any], words: str) -> None:
    problems = refusals(sweep(grid=..., random={"samples": 2, "space": {LR: space}}), alice)
    assert any(words in message for message in problems[f"random.space.{LR}"]), problems


@pytest.mark.parametrize(
    ("random", "field", "words"),
    [
        ({"space": {LR: {"uniform": [0, 1]}}}, "random.samples", "is required"),
        ({"samples": 2}, "random.space", "one or more keys"),
        ({"samples": 2, "seed": -1, "space": {LR: {"uniform": [0, 1]}}}, "random.seed", "integer"),
        ({"samples": 2, "order": "x", "space": {LR: {"uniform": [0, 1]}}}, "random.order", "unknown key"),
    ],
)
def test_a_bad_random_section_names_the_field(alice, datasets: Path, random, field: str, words: str) -> None:
    problems = refusals(sweep(grid=..., random=random), alice)
    assert any(words in message for message in problems[field]), problems


def test_a_swept_override_is_checked_as_an_advanced_commands_are(alice, datasets: Path) -> None:
    problems = refusals(sweep(grid={"hydra.callbacks.x._target_": ["os.system"], LR: ["$(id)"]}), alice)
    assert problems["grid.hydra.callbacks.x._target_"] == [
        "hydra.callbacks.x._target_=os.system: may not set hydra.callbacks.x._target_: of Hydra's own settings "
        "only hydra.run.dir, hydra.sweep.dir, hydra.sweep.subdir, hydra.output_subdir, hydra.job.chdir, "
        "hydra.job.name, hydra.verbose may be set"
    ]
    assert any("may use no $ expansion" in message for message in problems[f"grid.{LR}"])


def test_a_swept_key_argus_writes_names_the_spec_key_to_sweep(alice, datasets: Path) -> None:
    problems = refusals(sweep(grid={"trainer.n_gpus_per_node": [2, 4], "trainer.default_local_dir": ["x"]}), alice)
    set_instead = (
        "may not set trainer.n_gpus_per_node: Argus sets it from the spec's n_gpus_per_node; "
        "set n_gpus_per_node instead"
    )
    assert problems["grid.trainer.n_gpus_per_node"] == [
        f"trainer.n_gpus_per_node=2: {set_instead}",
        f"trainer.n_gpus_per_node=4: {set_instead}",
    ]
    assert any("Argus sets it itself" in message for message in problems["grid.trainer.default_local_dir"])
    # An advanced command sets them itself: there the key is its own.
    assert refusals(sweep(base=ADVANCED_BASE, grid={"trainer.n_gpus_per_node": [2]}), alice) == {
        "base.command": [
            "trial 0 (trainer.n_gpus_per_node=2): sets trainer.n_gpus_per_node=2 but the spec says n_gpus_per_node: 4"
        ]
    }


def test_a_swept_switch_of_a_pool_the_advanced_base_sizes_is_judged_with_the_whole_command(
    alice, datasets: Path
) -> None:
    sized = ADVANCED_BASE["command"].rstrip() + " reward.reward_model.nnodes=1 reward.reward_model.n_gpus_per_node=2\n"
    document = parse(
        sweep(
            base={**ADVANCED_BASE, "command": sized}, grid={"reward.reward_model.enable_resource_pool": [True, False]}
        ),
        alice,
    )
    assert [[pool.name for pool in trial.parsed.extra_pools] for trial in document.trials] == [["reward"], []]


def test_a_trial_refused_by_the_spec_checks_is_named_by_its_params(alice, datasets: Path) -> None:
    problems = refusals(sweep(grid={LR: [1e-6, 1e-5], "n_gpus_per_node": [4, 0]}), alice)
    assert problems == {
        "grid.n_gpus_per_node": [
            f"trial 1 ({LR}=1e-06, n_gpus_per_node=0): must be between 1 and 64, not 0 (and 1 other trial)"
        ]
    }


def test_a_problem_of_the_base_is_named_by_the_bases_key(alice, datasets: Path) -> None:
    base = {**BASE, "val_file": "/etc/passwd"}
    problems = refusals(sweep(base=base), alice)
    assert list(problems) == ["base.val_file"]
    assert problems["base.val_file"][0].endswith("(every trial)")
    # A key the base needs may come from the grid: each trial's spec is whole.
    document = parse(
        sweep(base={k: v for k, v in BASE.items() if k != "model_id"}, grid={"model_id": ["a/b", "c/d"]}), alice
    )
    assert [trial.parsed.resolved.model_id for trial in document.trials] == ["a/b", "c/d"]


def test_a_document_that_is_not_a_mapping_is_refused(alice) -> None:
    with pytest.raises(SpecError) as caught:
        parse_sweep("- base\n- grid\n", user=alice)
    assert list(caught.value.fields) == ["spec"]


HUGE = "0x" + "f" * 5000  # 20,000 bits: more digits than Python writes out (sys.get_int_max_str_digits)


@pytest.mark.parametrize(
    ("section", "field", "words"),
    [
        (f"grid: {{nnodes: [{HUGE}]}}", "grid.nnodes", "an integer of 20000 bits is too large"),
        (f"grid: {{{LR}: [{HUGE}, {HUGE}]}}", f"grid.{LR}", "names an integer of 20000 bits more than once"),
        (f"random: {{samples: {HUGE}, space: {{{LR}: {{choice: [1]}}}}}}", "random.samples", "not an integer of 20000"),
        (f"random: {{samples: 2, seed: {HUGE}, space: {{{LR}: {{choice: [1]}}}}}}", "random.seed", "20000 bits"),
        (f"random: {{samples: 2, space: {{{LR}: {{randint: [1, {HUGE}]}}}}}}", f"random.space.{LR}", "two integers"),
        (f"random: {{samples: 2, space: {{{LR}: {{uniform: [1, {HUGE}]}}}}}}", f"random.space.{LR}", "two numbers"),
        (f"grid: {{{LR}: [1]}}\nmax_concurrent: {HUGE}", "max_concurrent", "not an integer of 20000 bits"),
    ],
)
def test_an_integer_too_long_to_write_out_is_a_400_naming_it(alice, datasets: Path, section, field, words) -> None:
    text = f"base: {json.dumps(BASE)}\n{section}\n"
    with pytest.raises(SpecError) as caught:
        parse_sweep(text, user=alice)
    assert any(words in message for message in caught.value.fields[field]), caught.value.fields
