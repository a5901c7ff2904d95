"""The example specs are valid for a user with the files they name (the demo's run on Ray is
in tests/scheduler/test_demo.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.specs.parse import parse_spec

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture
def example_files(shared_root: Path, alice) -> None:
    for relative in ("datasets/gsm8k/train.parquet", "datasets/gsm8k/test.parquet"):
        (shared_root / relative).parent.mkdir(parents=True, exist_ok=True)
        (shared_root / relative).write_bytes(b"PAR1")
    home = shared_root / "users" / "alice"
    (home / "datasets" / "sft").mkdir(parents=True)
    for name in ("train.parquet", "val.parquet"):
        (home / "datasets" / "sft" / name).write_bytes(b"PAR1")
    (home / "code" / "reward.py").write_text((EXAMPLES / "gpu" / "reward.py").read_text())


@pytest.mark.parametrize("name", ["ppo", "grpo", "sft", "advanced-reward"])
def test_the_gpu_examples_are_valid_specs(example_files, name: str) -> None:
    parsed = parse_spec((EXAMPLES / "gpu" / f"{name}.yaml").read_text(), username="alice")
    assert parsed.resolved.nnodes >= 1
    if name == "advanced-reward":
        assert parsed.warnings == []  # it names data.train_files and the ray address


def test_the_demo_is_valid_where_make_run_allows_its_module(settings, alice) -> None:
    settings.ARGUS_ADVANCED_ALLOWED_MODULES = ["verl.trainer.", "examples."]
    parsed = parse_spec((EXAMPLES / "demo.yaml").read_text(), username="alice")
    assert (parsed.resolved.nnodes, parsed.resolved.n_gpus_per_node) == (2, 2)


def test_the_demo_module_is_refused_in_production(alice) -> None:
    from tasks.specs.errors import SpecError

    with pytest.raises(SpecError) as refused:
        parse_spec((EXAMPLES / "demo.yaml").read_text(), username="alice")
    assert "command" in refused.value.fields


def test_the_reward_example_scores_gsm8k_answers() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("reward", EXAMPLES / "gpu" / "reward.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    score = module.compute_score
    assert score(data_source="gsm8k", solution_str="so #### 1,234", ground_truth="1234") == 1.0
    assert score(data_source="gsm8k", solution_str="#### 7", ground_truth="8") == 0.1
    assert score(data_source="gsm8k", solution_str="no answer", ground_truth="8") == 0.0


def test_the_pipeline_demo_is_a_valid_pipeline_document(alice) -> None:
    from tasks.pipelines.document import is_pipeline_document, parse_pipeline

    text = (EXAMPLES / "pipeline.yaml").read_text()
    assert is_pipeline_document(text)
    document = parse_pipeline(text, username="alice")
    assert document.name == "demo-sft-export-ppo"
    assert [(s.name, s.parsed.resolved.workload, s.after, s.after_any) for s in document.steps] == [
        ("sft", "sft", (), ()),
        ("sft-export", "export", ("sft",), ()),
        ("ppo", "ppo", ("sft-export",), ()),
    ]
    # The stand-in reads no data: the trainers' only warning says so (no data.train_files).
    assert [len(step.parsed.warnings) for step in document.steps] == [1, 0, 1]
    assert all("data.train_files" in step.parsed.warnings[0] for step in (document.steps[0], document.steps[2]))
    # The outputs it hands on stay macros until each step starts (tasks.pipelines.outputs.resolve_step).
    assert document.steps[1].parsed.resolved.checkpoint == "${steps.sft.checkpoint}"
    assert "actor_rollout_ref.model.path=${steps.sft-export.hf_model} " in (
        document.steps[2].parsed.resolved.command or ""
    )
    # Every step fits one of make run's workers (ARGUS_DEV_GPUS, 4 by default).
    assert max(step.parsed.resolved.nnodes * step.parsed.resolved.n_gpus_per_node for step in document.steps) <= 4


def test_the_sweep_example_is_three_trials_of_the_demo_where_make_run_allows_its_module(settings, alice) -> None:
    from tasks.sweeps.document import parse_sweep

    settings.ARGUS_ADVANCED_ALLOWED_MODULES = ["verl.trainer.", "examples."]
    document = parse_sweep((EXAMPLES / "sweep.yaml").read_text(), user=alice)
    assert [trial.params for trial in document.trials] == [{"+demo.lr": 0.2}, {"+demo.lr": 0.05}, {"+demo.lr": 0.01}]
    assert (document.max_concurrent, document.metric, document.mode) == (2, "val/loss", "min")
    # The demo trainer logs val/loss on its console lines, where Argus reads curves.
    assert "val/loss" in (EXAMPLES / "tiny_trainer.py").read_text()
    commands = [trial.parsed.resolved.command or "" for trial in document.trials]
    assert [command.rsplit(None, 1)[-1] for command in commands] == ["+demo.lr=0.2", "+demo.lr=0.05", "+demo.lr=0.01"]
