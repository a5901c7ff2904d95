from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tasks.specs.errors import SpecError
from tasks.specs.parse import ParsedSpec, parse_spec
from tasks.specs.resolved import ResolvedSpec


@pytest.fixture
def data(shared_root: Path, alice, bob) -> Path:
    """The files the specs below read: a shared dataset, alice's reward file and model, bob's data."""
    gsm8k = shared_root / "datasets" / "gsm8k"
    gsm8k.mkdir()
    (gsm8k / "train.parquet").write_bytes(b"PAR1")
    (gsm8k / "test.parquet").write_bytes(b"PAR1")
    home = shared_root / "users" / "alice"
    (home / "code" / "reward.py").write_text("def compute_score(**kwargs):\n    return 0.0\n")
    (home / "models" / "tiny").mkdir()
    (shared_root / "users" / "bob" / "datasets" / "secret.parquet").write_bytes(b"PAR1")
    return shared_root


def basic(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "workload": "ppo",
        "nnodes": 2,
        "n_gpus_per_node": 4,
        "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
        "train_file": "$HOME/common/datasets/gsm8k/train.parquet",
        "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
    }
    spec.update(changes)
    return {key: value for key, value in spec.items() if value is not ...}


def as_yaml(spec: dict[str, Any]) -> str:
    return yaml.safe_dump(spec, sort_keys=False)


GOOD_COMMAND = (
    "PYTHONUNBUFFERED=1 python3 -m verl.trainer.main_ppo \\\n"
    "  data.train_files=$HOME/common/datasets/gsm8k/train.parquet \\\n"
    "  data.val_files=$HOME/common/datasets/gsm8k/test.parquet \\\n"
    "  actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\\n"
    "  custom_reward_function.path=$HOME/code/reward.py \\\n"
    "  custom_reward_function.name=compute_score \\\n"
    "  trainer.nnodes=2 trainer.n_gpus_per_node=4 \\\n"
    "  trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR \\\n"
    "  +ray_kwargs.ray_init.address=auto\n"
)


def advanced(command: str = GOOD_COMMAND, **changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"kind": "advanced", "workload": "ppo", "nnodes": 2, "n_gpus_per_node": 4}
    spec["command"] = command
    spec.update(changes)
    return spec


def command_of(parsed: ParsedSpec) -> str:
    """An advanced spec's resolved command."""
    assert parsed.resolved.command is not None
    return parsed.resolved.command


def errors(source: bytes | str | dict[str, Any], username: str = "alice") -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(source, username=username)
    assert caught.value.code == "invalid"
    return caught.value.fields


def command_errors(command: str) -> str:
    """Every message about the command, joined, for `in` checks."""
    fields = errors(advanced(command))
    assert set(fields) == {"command"}
    return " | ".join(fields["command"])


# --- Accepted specs --------------------------------------------------------------------------------


def test_it_accepts_the_basic_example(data: Path) -> None:
    text = (
        "workload: ppo\nnnodes: 2\nn_gpus_per_node: 4\nmodel_id: Qwen/Qwen2.5-0.5B-Instruct\n"
        f"train_file: {data}/datasets/gsm8k/train.parquet\nval_file: {data}/datasets/gsm8k/test.parquet\n"
        "total_epochs: 1\ntotal_training_steps: null\nsave_freq: 10\ntest_freq: -1\n"
        "priority: normal\nmax_retries: 0\n"
    )
    parsed = parse_spec(text.encode(), username="alice")
    assert parsed == ParsedSpec(
        raw=text,
        resolved=ResolvedSpec(
            kind="basic",
            workload="ppo",
            nnodes=2,
            n_gpus_per_node=4,
            priority="normal",
            preemptible=False,
            max_retries=0,
            time_limit=0,  # the site's defaults: no time limit, a stall timeout of 30 min
            after=(),
            after_any=(),
            stall_timeout=1800,
            secrets=(),
            keep_checkpoints=3,
            keep_best=None,
            model_id="Qwen/Qwen2.5-0.5B-Instruct",
            train_file=f"{data}/datasets/gsm8k/train.parquet",
            val_file=f"{data}/datasets/gsm8k/test.parquet",
            total_epochs=1,
            total_training_steps=None,
            save_freq=10,
            test_freq=-1,
            checkpoint=None,
            backend=None,
            trackers=(),
            project="alice",
            overrides=(),
            command=None,
        ),
        warnings=[],
    )
    # As Task.spec stores it: the keys of a basic training spec, lists as lists.
    assert parsed.resolved.to_json() == {
        "kind": "basic",
        "workload": "ppo",
        "nnodes": 2,
        "n_gpus_per_node": 4,
        "priority": "normal",
        "preemptible": False,
        "max_retries": 0,
        "time_limit": 0,
        "after": [],
        "after_any": [],
        "stall_timeout": 1800,
        "secrets": [],
        "keep_checkpoints": 3,
        "keep_best": None,
        "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
        "train_file": f"{data}/datasets/gsm8k/train.parquet",
        "val_file": f"{data}/datasets/gsm8k/test.parquet",
        "total_epochs": 1,
        "total_training_steps": None,
        "save_freq": 10,
        "test_freq": -1,
        "trackers": [],
        "project": "alice",
        "overrides": [],
    }
    fields = parsed.model_fields()
    assert (fields["time_limit_s"], fields["stall_timeout_s"]) == (None, 1800)


def test_it_fills_defaults_and_expands_macros(data: Path) -> None:
    parsed = parse_spec(as_yaml(basic(model_id="$HOME/models/tiny", priority="high")), username="alice")
    assert parsed.resolved.priority == "high"
    assert parsed.resolved.model_id == f"{data}/users/alice/models/tiny"
    assert parsed.resolved.train_file == f"{data}/datasets/gsm8k/train.parquet"
    assert parsed.resolved.total_epochs == 1
    assert parsed.resolved.total_training_steps is None
    assert parsed.resolved.save_freq == 20  # Argus's default: a retry has a checkpoint to resume
    assert parsed.resolved.test_freq == -1
    assert parsed.resolved.max_retries == 0


def test_it_accepts_a_json_object_and_keeps_a_yaml_copy(data: Path) -> None:
    spec = basic(workload="grpo", total_training_steps=50)
    parsed = parse_spec(spec, username="alice")
    assert parsed.resolved.workload == "grpo"
    assert parsed.resolved.total_training_steps == 50
    assert yaml.safe_load(parsed.raw) == spec


def test_it_takes_null_optional_keys_as_their_default(data: Path) -> None:
    parsed = parse_spec(as_yaml(basic(priority=None, max_retries=None, save_freq=None)), username="alice")
    assert (parsed.resolved.priority, parsed.resolved.max_retries, parsed.resolved.save_freq) == ("normal", 0, 20)


def test_it_accepts_hub_ids_without_looking_for_them(data: Path) -> None:
    parsed = parse_spec(as_yaml(basic(model_id="meta-llama/Llama-3.1-8B")), username="alice")
    assert parsed.resolved.model_id == "meta-llama/Llama-3.1-8B"


def test_it_accepts_the_older_common_layout(data: Path) -> None:
    old = data / "common" / "datasets" / "gsm8k"
    old.mkdir(parents=True)
    (old / "train.parquet").write_bytes(b"PAR1")
    parsed = parse_spec(as_yaml(basic(train_file=f"{old}/train.parquet")), username="alice")
    assert parsed.resolved.train_file == f"{old}/train.parquet"


def test_it_accepts_the_advanced_example(data: Path) -> None:
    parsed = parse_spec(as_yaml(advanced()), username="alice")
    assert parsed.resolved.kind == "advanced"
    assert (parsed.resolved.nnodes, parsed.resolved.n_gpus_per_node, parsed.resolved.workload) == (2, 4, "ppo")
    assert parsed.warnings == []
    command = command_of(parsed)
    assert command == GOOD_COMMAND.replace("$HOME/common/datasets", f"{data}/datasets").replace(
        "$HOME", f"{data}/users/alice"
    ).rstrip("\n")
    assert "$HOME" not in command
    assert set(parsed.resolved.to_json()) == {
        "kind",
        "workload",
        "nnodes",
        "n_gpus_per_node",
        "priority",
        "preemptible",
        "max_retries",
        "command",
        "time_limit",
        "stall_timeout",
        "after",
        "after_any",
        "secrets",
        "keep_checkpoints",
        "keep_best",
    }


def test_it_accepts_python_env_assignments_and_the_newer_reward_key(data: Path) -> None:
    command = (
        "HYDRA_FULL_ERROR=1 NCCL_DEBUG='WARN' python -m verl.trainer.main_ppo "
        "data.train_files=${HOME}/common/datasets/gsm8k/train.parquet "
        "reward.custom_reward_function.path=$HOME/code/reward.py "
        "trainer.nnodes=2 trainer.n_gpus_per_node=4 +ray_kwargs.ray_init.address=auto "
        "trainer.default_local_dir='${ARGUS_CHECKPOINT_DIR}/actor'"
    )
    assert parse_spec(advanced(command), username="alice").warnings == []


def test_it_warns_about_missing_train_files_and_ray_address(data: Path) -> None:
    parsed = parse_spec(
        advanced("python3 -m verl.trainer.main_ppo trainer.nnodes=2 trainer.n_gpus_per_node=4"),
        username="alice",
    )
    assert len(parsed.warnings) == 3
    assert "data.train_files" in parsed.warnings[0]
    assert "+ray_kwargs.ray_init.address=auto" in parsed.warnings[1]
    assert parsed.warnings[2] == (
        "The command sets no trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR: a retry will not resume "
        "from this task's checkpoints (each attempt starts from scratch)."
    )


def test_it_warns_when_the_command_leaves_the_gpu_counts_to_verl(data: Path) -> None:
    parsed = parse_spec(
        advanced("python3 -m verl.trainer.main_ppo data.train_files=$HOME/common/datasets/gsm8k/train.parquet"),
        username="alice",
    )
    assert any("trainer.nnodes" in w for w in parsed.warnings)
    assert any("trainer.n_gpus_per_node" in w for w in parsed.warnings)


def test_it_honours_the_allowed_modules_setting(data: Path, settings) -> None:
    settings.ARGUS_ADVANCED_ALLOWED_MODULES = ["verl.trainer.", "mylab.eval"]
    parse_spec(advanced("python3 -m mylab.eval.run trainer.nnodes=2 trainer.n_gpus_per_node=4"), username="alice")
    assert "allowed modules start with" in command_errors("python3 -m mylab.evaluation x=1")


# --- Rejections: the document ----------------------------------------------------------------------


def test_it_rejects_specs_over_64_kib_with_too_large() -> None:
    text = as_yaml(basic()) + "#" * 65536
    for source in (text, text.encode()):
        with pytest.raises(SpecError) as caught:
            parse_spec(source, username="alice")
        assert caught.value.code == "too_large"
        assert list(caught.value.fields) == ["spec"]
    with pytest.raises(SpecError) as caught:
        parse_spec(advanced("python3 -m verl.trainer.main_ppo " + "x=1 " * 20000), username="alice")
    assert caught.value.code == "too_large"


def test_it_refuses_a_billion_laughs_document_fast() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]")
    started = time.perf_counter()
    fields = errors("\n".join(lines))
    assert time.perf_counter() - started < 0.5
    assert "anchors and aliases" in fields["spec"][0]


def test_it_refuses_any_alias() -> None:
    fields = errors("workload: &w ppo\nkind: *w\n")
    assert fields == {
        "spec": ["invalid YAML at line 1, column 11: YAML anchors and aliases (&name, *name) are not allowed"]
    }


def test_it_refuses_deep_nesting() -> None:
    assert "nested deeper" in errors("workload: " + "[" * 5000 + "]" * 5000)["spec"][0]


@pytest.mark.parametrize("char", ["\x01", "\x1b", "\x80", "\x9f"])
def test_it_refuses_c0_and_c1_control_characters(char: str) -> None:
    # PyYAML's reader refuses them as the loader is built, before any parsing starts.
    assert errors(f"workload: ppo{char}\n") == {
        "spec": [f"invalid YAML at line 1: character #x{ord(char):04x} is not allowed"]
    }


def test_it_names_a_huge_integer_by_its_size() -> None:
    # Python will not write out an int of more than 4,300 digits; the message must not try.
    # `? key` is YAML's explicit key: a plain one may not be longer than 1,024 characters.
    fields = errors("nnodes: 0x" + "f" * 20000 + "\n? 0x" + "f" * 20000 + "\n: 1\n")
    assert fields["nnodes"] == ["must be between 1 and 1024, not an integer of 80000 bits"]
    assert fields["an integer of 80000 bits"] == ["keys must be strings, not an integer"]


def test_it_refuses_a_deeply_nested_json_object() -> None:
    spec: dict[str, Any] = {}
    inner = spec
    for _ in range(900):
        inner["a"] = {}
        inner = inner["a"]
    assert errors(spec) == {"spec": ["nested deeper than 16 levels"]}


def test_it_accepts_a_json_object_nested_to_the_limit(data: Path) -> None:
    nested: Any = "x"
    for _ in range(15):
        nested = [nested]
    assert errors(basic(model_id=nested))["model_id"] == ["must be a string, not a list"]


def test_it_reports_broken_yaml_with_line_and_column() -> None:
    fields = errors("workload: ppo\nnnodes: [1, 2\nn_gpus_per_node: 4\n")
    assert list(fields) == ["spec"]
    assert "invalid YAML at line 3, column " in fields["spec"][0]


def test_it_rejects_unknown_yaml_tags() -> None:
    assert "invalid YAML at line 1" in errors("workload: !!python/object:os.system ls\n")["spec"][0]


def test_it_rejects_impossible_scalars() -> None:
    assert "invalid YAML value" in errors("workload: ppo\nnnodes: 2024-13-45\n")["spec"][0]


@pytest.mark.parametrize(
    ("text", "what"),
    [("- workload: ppo\n", "not a list"), ("ppo\n", "not a string"), ("42\n", "not an integer")],
)
def test_it_rejects_a_document_that_is_not_a_mapping(text: str, what: str) -> None:
    assert errors(text) == {"spec": [f"must be a mapping of keys to values, {what}"]}


@pytest.mark.parametrize("text", ["", "   \n\n", "# just a comment\n", "---\n"])
def test_it_rejects_an_empty_document(text: str) -> None:
    fields = errors(text)
    assert list(fields) == ["spec"]
    assert "empty" in fields["spec"][0] or "not null" in fields["spec"][0]


def test_it_rejects_multiple_documents() -> None:
    fields = errors(as_yaml(basic()) + "---\n" + as_yaml(basic()))
    assert fields == {"spec": ["must be a single YAML document, but another one starts at line 7, column 1"]}


def test_it_rejects_non_utf8_bytes() -> None:
    fields = errors(b"workload: ppo\nmodel_id: caf\xe9\n")
    assert fields == {"spec": ["is not valid UTF-8 (byte 0xe9 at offset 27)"]}


def test_it_rejects_lone_surrogates_in_text() -> None:
    assert "not valid Unicode" in errors("workload: ppo\ufeff\ud800")["spec"][0]


@pytest.mark.parametrize(
    "source",
    ['{"\\udb7e\\udd49-": {}, "a": "x"}', 'workload: "\\ud800"\n', {"workload": "ppo", "\ud800": 1}],
    ids=["yaml-key-escape", "yaml-value-escape", "json-key"],
)
def test_it_rejects_lone_surrogates_made_by_escapes(source: str | dict[str, Any]) -> None:
    fields = errors(source)
    assert list(fields) == ["spec"] and "lone surrogate" in fields["spec"][0]
    json.dumps(fields, ensure_ascii=False).encode("utf-8")  # the answer can be written


def test_it_rejects_keys_that_are_not_strings(data: Path) -> None:
    fields = errors(as_yaml(basic()) + "1: one\nnull: nothing\n")
    assert fields == {"1": ["keys must be strings, not an integer"], "None": ["keys must be strings, not null"]}


def test_it_rejects_duplicate_keys() -> None:
    fields = errors("workload: ppo\nnnodes: 1\nnnodes: 8\n")
    assert fields == {"spec": ["invalid YAML at line 3, column 1: duplicate key 'nnodes'"]}


# --- Rejections: fields ----------------------------------------------------------------------------


def test_it_rejects_unknown_keys(data: Path) -> None:
    fields = errors(as_yaml(basic(n_gpus_per_nodes=4, colour="blue")))
    assert fields["n_gpus_per_nodes"] == ["unknown key; did you mean 'n_gpus_per_node'?"]
    assert fields["colour"][0].startswith("unknown key; allowed: kind, workload, nnodes")
    assert set(fields) == {"n_gpus_per_nodes", "colour"}


def test_it_names_keys_of_the_other_kind(data: Path) -> None:
    assert errors(as_yaml(basic(command="python3 -m verl.trainer.main_ppo"))) == {
        "command": ["is only for advanced specs (add kind: advanced)"]
    }
    fields = errors(advanced(model_id="Qwen/Qwen2.5-0.5B-Instruct"))
    assert fields == {"model_id": ["is only for basic specs; an advanced spec sets it in its command"]}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("nnodes", "2", "must be an integer, not a string"),
        ("nnodes", True, "must be an integer, not a boolean"),
        ("n_gpus_per_node", 2.0, "must be an integer, not a number"),
        ("max_retries", False, "must be an integer, not a boolean"),
        ("total_epochs", [1], "must be an integer, not a list"),
        ("save_freq", {"every": 10}, "must be an integer, not a mapping"),
        ("workload", 1, "must be one of ppo, grpo, sft, export, eval, not an integer"),
        ("priority", True, "must be one of normal, high, not a boolean"),
        ("model_id", 5, "must be a string, not an integer"),
        ("train_file", ["a", "b"], "must be a string, not a list"),
        ("nnodes", None, "must not be null"),
    ],
)
def test_it_rejects_wrong_types(data: Path, key: str, value: Any, message: str) -> None:
    assert errors(as_yaml(basic(**{key: value}))) == {key: [message]}


@pytest.mark.parametrize("key", ["workload", "nnodes", "n_gpus_per_node", "model_id", "train_file", "val_file"])
def test_it_rejects_a_missing_basic_key(data: Path, key: str) -> None:
    assert errors(as_yaml(basic(**{key: ...}))) == {key: ["is required"]}


@pytest.mark.parametrize("key", ["workload", "nnodes", "n_gpus_per_node", "command"])
def test_it_rejects_a_missing_advanced_key(data: Path, key: str) -> None:
    spec = advanced()
    del spec[key]
    assert errors(spec) == {key: ["is required"]}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("nnodes", 0, "must be between 1 and 1024, not 0"),
        ("nnodes", -3, "must be between 1 and 1024, not -3"),
        ("nnodes", 100000, "must be between 1 and 1024, not 100000"),
        ("n_gpus_per_node", 0, "must be between 1 and 64, not 0"),
        ("n_gpus_per_node", 65, "must be between 1 and 64, not 65"),
        ("max_retries", -1, "must be between 0 and 20, not -1"),
        ("max_retries", 10**9, "must be between 0 and 20, not 1000000000"),
        ("total_epochs", 0, "must be between 1 and 10000, not 0"),
        ("total_training_steps", 0, "must be between 1 and 100000000, not 0"),
        ("save_freq", 0, "must be -1 (never) or at least 1, not 0"),
        ("test_freq", -2, "must be between -1 and 100000000, not -2"),
    ],
)
def test_it_rejects_numbers_out_of_range(data: Path, key: str, value: int, message: str) -> None:
    assert errors(as_yaml(basic(**{key: value}))) == {key: [message]}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("workload", "dpo", "must be one of ppo, grpo, sft, export, eval, not 'dpo'"),
        ("kind", "expert", "must be one of basic, advanced, not 'expert'"),
        ("priority", "urgent", "must be one of normal, high, not 'urgent'"),
        ("model_id", "  ", "must not be empty"),
    ],
)
def test_it_rejects_unknown_choices(data: Path, key: str, value: str, message: str) -> None:
    assert errors(as_yaml(basic(**{key: value}))) == {key: [message]}


def test_it_collects_every_problem_in_one_error(data: Path) -> None:
    spec = basic(workload="dpo", nnodes=0, n_gpus_per_node=True, priority="urgent", max_retries=-1)
    spec.update(train_file="/etc/passwd", val_file="$HOME/../bob/datasets/secret.parquet", extra=1)
    del spec["model_id"]
    fields = errors(as_yaml(spec))
    assert set(fields) == {
        "workload",
        "nnodes",
        "n_gpus_per_node",
        "priority",
        "max_retries",
        "model_id",
        "train_file",
        "val_file",
        "extra",
    }


def test_it_judges_keys_against_both_kinds_when_the_kind_is_unknown(data: Path) -> None:
    fields = errors(as_yaml(basic(kind="expert", command="python3 -m x", nonsense=1)))
    assert set(fields) == {"kind", "nonsense"}


# --- Rejections: paths of basic specs --------------------------------------------------------------


@pytest.mark.parametrize("key", ["train_file", "val_file", "model_id"])
def test_it_rejects_paths_in_another_users_home(data: Path, key: str) -> None:
    fields = errors(as_yaml(basic(**{key: f"{data}/users/bob/datasets/secret.parquet"})))
    assert list(fields) == [key]
    assert "another user's home" in fields[key][0]


def test_it_rejects_dot_dot_escapes(data: Path) -> None:
    fields = errors(as_yaml(basic(train_file="$HOME/../bob/datasets/secret.parquet")))
    assert fields == {"train_file": ["'$HOME/../bob/datasets/secret.parquet' contains '..'"]}


def test_it_rejects_a_symlink_into_another_home(data: Path) -> None:
    link = data / "users" / "alice" / "datasets" / "train.parquet"
    link.symlink_to(data / "users" / "bob" / "datasets" / "secret.parquet")
    fields = errors(as_yaml(basic(train_file="$HOME/datasets/train.parquet")))
    assert list(fields) == ["train_file"]
    assert "another user's home" in fields["train_file"][0]


def test_it_rejects_a_symlink_to_etc(data: Path) -> None:
    (data / "users" / "alice" / "models" / "sys").symlink_to("/etc")
    fields = errors(as_yaml(basic(model_id="$HOME/models/sys")))
    assert list(fields) == ["model_id"]
    assert "through a symlink" in fields["model_id"][0]


def test_it_rejects_missing_and_outside_paths(data: Path) -> None:
    fields = errors(as_yaml(basic(train_file="$HOME/datasets/none.parquet", val_file="/etc/hostname")))
    assert fields["train_file"] == ["'$HOME/datasets/none.parquet' does not exist"]
    assert "outside the allowed directories" in fields["val_file"][0]


def test_it_rejects_a_model_id_that_is_neither_a_hub_id_nor_a_path(data: Path) -> None:
    assert errors(as_yaml(basic(model_id="gpt2"))) == {
        "model_id": [
            "'gpt2' is neither a hub id (org/name, such as Qwen/Qwen2.5-0.5B-Instruct) "
            "nor an absolute path (/… or $HOME/…)"
        ]
    }


# --- Rejections: advanced commands -----------------------------------------------------------------

ENTRY = "python3 -m verl.trainer.main_ppo trainer.nnodes=2 trainer.n_gpus_per_node=4"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (f"{ENTRY}; rm -rf /", "';'"),
        (f"{ENTRY} && curl evil.example", "'&'"),
        (f"{ENTRY} || true", "'|'"),
        (f"{ENTRY} | tee log", "'|'"),
        (f"{ENTRY} & python3 -m http.server", "'&'"),
        (f"{ENTRY} x=`id`", "backticks"),
        (f"{ENTRY} x=$(id)", "no $ expansion"),
        (f"{ENTRY} x=$((1+1))", "no $ expansion"),
        (f"{ENTRY} > /tmp/out", "'>'"),
        (f"{ENTRY} 2>&1", "'>'"),
        (f"{ENTRY} x=<(cat /etc/passwd)", "'<'"),
        (f"{ENTRY} data.train_files=/data/*.parquet", "glob"),
        (f"{ENTRY}\nrm -rf $HOME", "several commands"),
        (f"{ENTRY} \\\\\nrm -rf /", "backslash"),
        (f"{ENTRY} # comment \\\nrm -rf /", "comments"),
        (f"{ENTRY} x=a\\ b", "backslash"),
        (f"{ENTRY}\r\nrm -rf /", "control characters"),
        (f"{ENTRY} x=$USER", "no $ expansion"),
        (f"{ENTRY} 'x=${{oc.env:AWS_SECRET}}'", "no $ expansion"),
        (f"{ENTRY} x='unclosed", "cannot be split into words"),
    ],
)
def test_it_refuses_shell_syntax_that_runs_other_programs(data: Path, command: str, expected: str) -> None:
    assert expected in command_errors(command)


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "bash -c 'python3 -m verl.trainer.main_ppo'",
        "python3 -c 'import os' -m verl.trainer.main_ppo",
        "python3 verl/trainer/main_ppo.py",
        "/usr/bin/python3 -m verl.trainer.main_ppo",
        "env python3 -m verl.trainer.main_ppo",
        "'X=1' python3 -m verl.trainer.main_ppo",
    ],
)
def test_it_requires_a_python_module_entry(data: Path, command: str) -> None:
    assert "must start with python3 -m <module>" in command_errors(command)


@pytest.mark.parametrize("module", ["os", "http.server", "verl.trainerx.main", "verl.utils.evil", "verl"])
def test_it_rejects_modules_that_are_not_allowed(data: Path, module: str) -> None:
    assert f"runs module {module!r}" in command_errors(f"python3 -m {module} trainer.nnodes=2")


def test_it_needs_the_dot_of_a_prefix_setting(data: Path, settings) -> None:
    settings.ARGUS_ADVANCED_ALLOWED_MODULES = ["verl.trainer"]
    assert "runs module 'verl.trainerevil'" in command_errors("python3 -m verl.trainerevil")
    parse_spec(advanced(ENTRY), username="alice")


@pytest.mark.parametrize("name", ["PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "BASH_ENV"])
def test_it_refuses_assignments_that_change_what_runs(data: Path, name: str) -> None:
    assert f"may not set {name}" in command_errors(f"{name}=$HOME/code {ENTRY}")


def test_it_rejects_paths_of_another_user(data: Path) -> None:
    messages = command_errors(f"{ENTRY} trainer.default_local_dir={data}/users/bob/jobs/x")
    assert f"path '{data}/users/bob/jobs/x' is in another user's home" in messages


@pytest.mark.parametrize(
    "argument",
    [
        "'hydra.searchpath=[file://{root}/users/bob/conf]'",
        "X={root}/users/alice:{root}/users/bob",
        "data.val_files=[{root}/datasets/gsm8k/test.parquet,{root}/users/bob/datasets/secret.parquet]",
        "a=/{root}//users//bob",
        "x={root}/users",
    ],
)
def test_it_finds_other_users_paths_anywhere_in_an_argument(data: Path, argument: str) -> None:
    assert "is in another user's home" in command_errors(f"{ENTRY} {argument.format(root=data)}")


def test_it_finds_paths_split_by_quotes(data: Path) -> None:
    # bash joins the quoted pieces into one word; the check sees the word, not the pieces.
    assert "another user's home" in command_errors(f"{ENTRY} x={data}/users/'b'ob/datasets")


def test_it_rejects_dot_dot_in_the_command(data: Path) -> None:
    assert "'..'" in command_errors(f"{ENTRY} data.val_files=$HOME/../bob/datasets/secret.parquet")
    assert "'..'" in command_errors(f"{ENTRY} trainer.default_local_dir=../../users/bob")


def test_it_rejects_a_symlink_into_another_home_in_the_command(data: Path) -> None:
    (data / "users" / "alice" / "datasets" / "bobs").symlink_to(data / "users" / "bob" / "datasets")
    messages = command_errors(f"{ENTRY} some.key=$HOME/datasets/bobs/secret.parquet")
    assert "is in another user's home" in messages


@pytest.mark.parametrize("argument", ["x=~/data", "x=~bob/data", "~/data", "x=a:~/b"])
def test_it_refuses_tilde_paths(data: Path, argument: str) -> None:
    assert "~ paths" in command_errors(f"{ENTRY} {argument}")


def test_it_allows_hydra_deletions_with_tilde(data: Path) -> None:
    spec = parse_spec(advanced(f"{ENTRY} ~trainer.val_before_train"), username="alice")
    assert command_of(spec).endswith(" ~trainer.val_before_train")  # passed on to Hydra as written


@pytest.mark.parametrize(
    "argument", ["x={root}/datasets/user[s]/bob", "x={root}/user{{s,}}/bob", "x=[{root}/user{{a,b}}]"]
)
def test_it_refuses_brace_and_bracket_globs_in_paths(data: Path, argument: str) -> None:
    assert "glob or brace characters" in command_errors(f"{ENTRY} {argument.format(root=data)}")


def test_it_checks_input_overrides_like_basic_paths(data: Path) -> None:
    messages = command_errors(
        f"{ENTRY} data.train_files=$HOME/datasets/none.parquet "
        "actor_rollout_ref.model.path=/etc 'data.val_files=[relative.parquet]'"
    )
    assert "data.train_files: " in messages and "does not exist" in messages
    assert "actor_rollout_ref.model.path: '/etc' is outside the allowed directories" in messages
    assert "data.val_files: 'relative.parquet' is not an absolute path" in messages


def test_it_accepts_hydra_lists_of_allowed_inputs(data: Path) -> None:
    files = f"{data}/datasets/gsm8k/train.parquet,'$HOME/common/datasets/gsm8k/test.parquet'"
    spec = parse_spec(advanced(f"{ENTRY} data.train_files=[{files}] model.path=$HOME/models/tiny"), username="alice")
    # The list passes on as a list, each item resolved ($HOME/common is the shared folder itself).
    gsm8k = data / "datasets" / "gsm8k"
    assert f"data.train_files=[{gsm8k}/train.parquet,'{gsm8k}/test.parquet']" in command_of(spec)
    assert f"model.path={data}/users/alice/models/tiny" in command_of(spec)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("$HOME/datasets/reward.py", "is outside the allowed directories"),
        ("$HOME/code/missing.py", "does not exist"),
        ("$HOME/code", "is not a file"),
        ("{root}/users/bob/code/reward.py", "is in another user's home"),
        ("{root}/datasets/gsm8k/train.parquet", "is outside the allowed directories"),
        ("reward.py", "is not an absolute path"),
    ],
)
def test_it_keeps_reward_functions_under_home_code(data: Path, value: str, expected: str) -> None:
    (data / "users" / "alice" / "datasets" / "reward.py").write_text("")
    for key in ("custom_reward_function.path", "reward.custom_reward_function.path"):
        messages = command_errors(f"{ENTRY} {key}={value.format(root=data)}")
        assert f"{key}: " in messages and expected in messages


def test_it_rejects_a_reward_symlink_leaving_home_code(data: Path) -> None:
    (data / "users" / "alice" / "code" / "r.py").symlink_to(data / "datasets" / "gsm8k" / "train.parquet")
    assert "through a symlink" in command_errors(f"{ENTRY} custom_reward_function.path=$HOME/code/r.py")


def test_it_rejects_gpu_counts_that_disagree_with_the_spec(data: Path) -> None:
    messages = command_errors("python3 -m verl.trainer.main_ppo trainer.nnodes=8 trainer.n_gpus_per_node=4")
    assert messages == "sets trainer.nnodes=8 but the spec says nnodes: 2"


def test_it_rejects_an_empty_command(data: Path) -> None:
    assert errors(advanced("  \n")) == {"command": ["must not be empty"]}


# --- Hydra's own forms, the environment, outputs (issue 12) ------------------------------------------

# The spec's numbers are nnodes: 2, n_gpus_per_node: 4 (see `advanced`).


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("'trainer={n_gpus_per_node:8,nnodes:4}'", "sets trainer.nnodes=4 (in trainer={n_gpus_per_node:8,nnodes:4})"),
        ("'trainer={n_gpus_per_node:8,nnodes:2}'", "sets trainer.n_gpus_per_node=8"),
        ("trainer={n_gpus_per_node:8}", "sets trainer.n_gpus_per_node=8 (in trainer={n_gpus_per_node:8})"),
        ("+trainer.nnodes=8", "sets trainer.nnodes=8 (in +trainer.nnodes=8)"),
        ("'trainer.nnodes=int(8)'", "sets trainer.nnodes=int(8) but"),
        ("'data={val_files:/etc/passwd,x:1}'", "data.val_files: '/etc/passwd' is outside the allowed directories"),
        ("'data={train_files:[/etc/passwd]}'", "data.train_files: '/etc/passwd' is outside the allowed directories"),
        (
            "'custom_reward_function={path:/tmp/evil.py,name:compute_score}'",
            "custom_reward_function.path: '/tmp/evil.py'",
        ),
        ("actor_rollout_ref.model={path:/etc}", "actor_rollout_ref.model.path: '/etc' is outside"),
        ("'actor_rollout_ref={model:{path:\"/etc\"}}'", "actor_rollout_ref.model.path: '/etc' is outside"),
        ("data.custom_cls.path=/tmp/evil.py", "data.custom_cls.path: '/tmp/evil.py' is outside"),
    ],
)
def test_it_checks_hydra_group_values_leaf_by_leaf(data: Path, argument: str, expected: str) -> None:
    assert expected in command_errors(f"{ENTRY} {argument}")


@pytest.mark.parametrize(
    "argument",
    [
        "trainer={n_gpus_per_node:8,nnodes:4}",
        "data={val_files:/etc/passwd,x:1}",
        "{data.val_files,x}=/etc/passwd",
        "x=a{1..9}",
    ],
)
def test_it_refuses_words_bash_would_brace_expand(data: Path, argument: str) -> None:
    # Unquoted, bash splits `k={a:1,b:2}` into `k=a:1 k=b:2` before Hydra sees it: the checks
    # must see the words that run, so such words are refused and quoting them is suggested.
    assert "bash would expand {…} into several words" in command_errors(f"{ENTRY} {argument}")


def test_it_accepts_group_values_that_pass_the_same_checks(data: Path) -> None:
    command = (
        f"{ENTRY} 'data={{train_files:[$HOME/common/datasets/gsm8k/train.parquet],max_prompt_length:512}}' "
        "'trainer={nnodes:2,n_gpus_per_node:4,total_epochs:1,default_local_dir:$ARGUS_CHECKPOINT_DIR}' "
        "'custom_reward_function={path:$HOME/code/reward.py,name:compute_score}' "
        "actor_rollout_ref/rollout=vllm +ray_kwargs.ray_init.address=auto"
    )
    assert parse_spec(advanced(command), username="alice").warnings == []


@pytest.mark.parametrize(
    ("assignment", "name"),
    [
        ("HOME=$HOME/fakehome", "HOME"),
        ("PYTHONWARNINGS=ignore::mod.W", "PYTHONWARNINGS"),
        ("PYTHONINSPECT=1", "PYTHONINSPECT"),
        ("PYTHONUSERBASE=$HOME/code", "PYTHONUSERBASE"),
        ("PYTHONSAFEPATH=0", "PYTHONSAFEPATH"),
        ("NCCL_NET_PLUGIN=$HOME/code/x.so", "NCCL_NET_PLUGIN"),
        ("IFS=x", "IFS"),
    ],
)
def test_it_allows_only_listed_variables(data: Path, assignment: str, name: str) -> None:
    assert f"may not set {name}: only " in command_errors(f"{assignment} {ENTRY}")


@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        ("HF_HOME=/tmp/hf", "HF_HOME: '/tmp/hf' is outside the allowed directories"),
        ("WANDB_DIR=wandb", "WANDB_DIR: 'wandb' is not an absolute path"),
        ("TORCH_EXTENSIONS_DIR={root}/users/bob/code", "is in another user's home"),
    ],
)
def test_it_keeps_path_variables_in_the_allowed_areas(data: Path, assignment: str, expected: str) -> None:
    assert expected in command_errors(f"{assignment.format(root=data)} {ENTRY}")


def test_it_accepts_the_variables_verl_users_set(data: Path) -> None:
    command = (
        "PYTHONUNBUFFERED=1 HYDRA_FULL_ERROR=1 TOKENIZERS_PARALLELISM=false NCCL_DEBUG=WARN "
        "CUDA_DEVICE_MAX_CONNECTIONS=1 VLLM_ATTENTION_BACKEND=XFORMERS TORCH_NCCL_AVOID_RECORD_STREAMS=1 "
        "WANDB_MODE=offline HF_HOME=$HOME/common/hf HF_HUB_OFFLINE=1 "
        f"{ENTRY} data.train_files=$HOME/common/datasets/gsm8k/train.parquet +ray_kwargs.ray_init.address=auto "
        "trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR"
    )
    assert parse_spec(advanced(command), username="alice").warnings == []


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("--config-path=/tmp/evil", "--config-path: '/tmp/evil' is outside the allowed directories"),
        ("--config-path /tmp/evil", "--config-path: '/tmp/evil' is outside the allowed directories"),
        ("--config-p=/tmp/evil", "--config-path: '/tmp/evil' is outside"),  # argparse takes prefixes
        ("-cd /tmp/evil", "--config-dir: '/tmp/evil' is outside"),
        ("--config-path=pkg://evil", "must be a folder path, not a URL"),
        ("+hydra.callbacks.x._target_=os.system", "may not set hydra.callbacks.x._target_"),
        ("hydra.searchpath=[file:///tmp/evil]", "may not set hydra.searchpath"),
        ("hydra.job_logging.handlers.file.filename=/tmp/x.log", "may not set hydra.job_logging"),
        ("hydra/launcher=basic", "may not choose hydra/launcher"),
        ("'+trainer@hydra.callbacks=x'", "key@package overrides are not allowed"),
        ("-m", "may not sweep (--multirun)"),
        ("--multirun", "may not sweep (--multirun)"),
        ("--multi", "may not sweep (--multirun)"),
        ("trainer.total_epochs=1,2", "may not sweep ('trainer.total_epochs=1,2')"),
        ("'trainer.seed=range(1,9)'", "may not sweep"),
        ("--experimental-rerun=$HOME/code/x.pickle", "--experimental-rerun"),
        ("--no-such-switch", "Hydra cannot read the arguments: unrecognized arguments: --no-such-switch"),
        ("'data.val_files=[a'", "Hydra cannot read 'data.val_files=[a'"),
    ],
)
def test_it_refuses_hydras_own_switches_that_load_code_or_launch_runs(data: Path, argument: str, expected: str) -> None:
    assert expected in command_errors(f"{ENTRY} {argument}")


def test_it_accepts_a_config_name_and_a_readable_config_dir(data: Path) -> None:
    (data / "users" / "alice" / "code" / "conf").mkdir()
    # Options before the overrides: Hydra's argparse takes its positional overrides in one run.
    command = (
        f"python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer --config-dir=$HOME/code/conf {ENTRY[32:]}"
    )
    spec = parse_spec(advanced(command), username="alice")
    conf = data / "users" / "alice" / "code" / "conf"
    assert f"--config-name=ppo_megatron_trainer --config-dir={conf} " in command_of(spec)


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("trainer.default_local_dir=/tmp/x", "trainer.default_local_dir: '/tmp/x' is not inside your jobs folder"),
        ("trainer.default_local_dir={root}/datasets/x", "is not inside your jobs folder"),
        ("trainer.default_local_dir=users/bob/jobs", "'users/bob/jobs' is not an absolute path"),
        ("trainer.default_local_dir=$HOME/jobs", "is not inside your jobs folder"),
        ("trainer.default_local_dir=$HOME/models/x", "is not inside your jobs folder"),
        ("trainer={{default_local_dir:/tmp/x}}", "trainer.default_local_dir: '/tmp/x' is not inside"),
        ("hydra.run.dir=/tmp/x", "hydra.run.dir: '/tmp/x' is not inside your jobs folder"),
        ("hydra.sweep.dir=/tmp/x", "hydra.sweep.dir: '/tmp/x' is not inside your jobs folder"),
        ("hydra.output_subdir=/tmp/x", "hydra.output_subdir: '/tmp/x' must be a name relative"),
        ("trainer.rollout_data_dir=/tmp/x", "trainer.rollout_data_dir: '/tmp/x' is not inside"),
        ("+global_profiler.save_path=/tmp/x", "global_profiler.save_path: '/tmp/x' is not inside"),
    ],
)
def test_it_keeps_outputs_in_the_users_jobs_folder(data: Path, argument: str, expected: str) -> None:
    assert expected in command_errors(f"{ENTRY} {argument.format(root=data)}")


def test_it_refuses_an_output_folder_that_leaves_jobs_through_a_symlink(data: Path) -> None:
    (data / "users" / "alice" / "jobs" / "out").symlink_to(data / "datasets")
    messages = command_errors(f"{ENTRY} trainer.default_local_dir=$HOME/jobs/out/run1")
    assert "leads outside your jobs folder through a symlink" in messages


def test_it_accepts_output_folders_in_the_jobs_folder(data: Path) -> None:
    command = f"{ENTRY} trainer.default_local_dir=$HOME/jobs/run1/ckpt hydra.run.dir=$HOME/jobs/run1/hydra"
    spec = parse_spec(advanced(command + " hydra.output_subdir=.hydra"), username="alice")
    jobs = data / "users" / "alice" / "jobs"
    assert command_of(spec).endswith(
        f"trainer.default_local_dir={jobs}/run1/ckpt hydra.run.dir={jobs}/run1/hydra hydra.output_subdir=.hydra"
    )


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        (" ".join(f"a{i}=1" for i in range(600)), "arguments; at most 512 are allowed"),
        ("x=[" + ",".join(["a"] * 2000) + "]", "has 1999 list or sweep items in all; at most 1024"),
        ("x=" + "[" * 400 + "]" * 400, "nests brackets 400 deep"),
    ],
    ids=["arguments", "items", "nesting"],
)
def test_it_bounds_what_hydras_parser_is_given(data: Path, argument: str, expected: str) -> None:
    # Hydra's parser takes minutes over a list of 20,000 items and overflows the stack on deep
    # nesting: both must be refused before it sees them, fast.
    started = time.perf_counter()
    assert expected in command_errors(f"{ENTRY} {argument}")
    assert time.perf_counter() - started < 1.0


# --- Time limits and stall timeouts --------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [("90m", 5400), (7200, 7200), ("12h", 43200), ("1h30m", 5400)])
def test_a_time_limit_in_seconds_or_words(data: Path, value: object, seconds: int) -> None:
    parsed = parse_spec(basic(time_limit=value), username="alice")
    assert parsed.model_fields()["time_limit_s"] == seconds and parsed.resolved.time_limit == seconds


def test_no_time_limit_falls_back_to_the_site_default_and_0_means_none(data: Path, settings) -> None:
    settings.ARGUS_DEFAULT_TIME_LIMIT_S = 3600
    assert parse_spec(basic(), username="alice").model_fields()["time_limit_s"] == 3600
    assert parse_spec(basic(time_limit=None), username="alice").model_fields()["time_limit_s"] == 3600
    assert parse_spec(basic(time_limit=0), username="alice").model_fields()["time_limit_s"] is None


def test_a_time_limit_over_the_sites_cap_gets_the_cap_and_says_so(data: Path, settings) -> None:
    settings.ARGUS_MAX_TIME_LIMIT_S = 86400
    parsed = parse_spec(basic(time_limit="48h"), username="alice")
    assert parsed.model_fields()["time_limit_s"] == 86400
    assert parsed.warnings == ["time_limit: 48 h is over this site's cap (ARGUS_MAX_TIME_LIMIT_S): the task gets 24 h."]
    assert parse_spec(basic(), username="alice").model_fields()["time_limit_s"] == 86400  # no default: the cap holds


@pytest.mark.parametrize("value", ["soon", "-5m", True, [1], "1.5"])
def test_a_bad_duration_names_the_forms_accepted(data: Path, value: object) -> None:
    [message] = errors(basic(time_limit=value))["time_limit"]
    assert message.startswith("expected seconds or a duration like 90m, 12h or 1h30m")
    assert "stall_timeout" in errors(basic(stall_timeout=value))


def test_a_stall_timeout_defaults_to_the_sites_and_0_turns_it_off(data: Path, settings) -> None:
    settings.ARGUS_STALL_TIMEOUT_S = 1800
    assert parse_spec(basic(), username="alice").model_fields()["stall_timeout_s"] == 1800
    assert parse_spec(basic(stall_timeout="5m"), username="alice").model_fields()["stall_timeout_s"] == 300
    assert parse_spec(basic(stall_timeout=0), username="alice").model_fields()["stall_timeout_s"] is None


# --- The task's checkpoint folder in advanced commands ---------------------------------------------


def test_the_checkpoint_macro_is_kept_for_the_builder_and_checked_as_a_jobs_folder(data: Path) -> None:
    parsed = parse_spec(advanced(), username="alice")
    assert "trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR" in command_of(parsed)
    assert parsed.warnings == []


@pytest.mark.parametrize(
    "value",
    ["$ARGUS_CHECKPOINT_DIRS", "$ARGUS_CHECKPOINT_DIR/../../../bob/jobs/x", "$ARGUS_CHECKPOINT"],
)
def test_only_the_macro_itself_is_taken_and_it_cannot_lead_out(data: Path, value: str) -> None:
    command = GOOD_COMMAND.replace(
        "trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR", f"trainer.default_local_dir={value}"
    )
    assert "command" in errors(advanced(command))


def test_checkpoints_elsewhere_in_the_jobs_folder_are_allowed_but_warned_about(data: Path) -> None:
    command = GOOD_COMMAND.replace("$ARGUS_CHECKPOINT_DIR", "$HOME/jobs/run1")
    warnings = parse_spec(advanced(command), username="alice").warnings
    assert warnings == [
        "The command sets no trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR: a retry will not resume "
        "from this task's checkpoints (each attempt starts from scratch)."
    ]


@pytest.mark.parametrize("value", ["yes", 1, "true", [True]])
def test_preemptible_is_true_or_false(value: object, data: Path) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(as_yaml(basic(preemptible=value)), username="alice")
    assert list(caught.value.fields) == ["preemptible"]
    assert "must be true or false" in caught.value.fields["preemptible"][0]


def test_preemptible_defaults_to_false_and_is_kept(data: Path) -> None:
    assert parse_spec(as_yaml(basic()), username="alice").resolved.preemptible is False
    parsed = parse_spec(as_yaml(basic(preemptible=True)), username="alice")
    assert parsed.resolved.preemptible is True
    assert parsed.model_fields()["preemptible"] is True
