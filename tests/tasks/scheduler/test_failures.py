from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.choices import FailureKind
from tasks.scheduler.failures import classify, key_error_line, trim

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "verl"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
LOG_TAIL_BYTES = 64 * 1024  # what the scheduler reads of driver.log (tasks/scheduler.py)

VERL_TAIL = (
    "\x1b[36m(TaskRunnerV1 pid=3165)\x1b[0m Using dataset class: RLHFDataset\n"
    "ray.exceptions.RayTaskError(ValueError): \x1b[36mray::TaskRunnerV1.run()\x1b[39m (pid=3165, ip=10.0.0.2)\n"
    '  File "verl/single_controller/ray/base.py", line 120, in _check_resource_available\n'
    "ValueError: Total available GPUs 8.0 is less than total desired GPUs 16\n"
    "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
)
# As every real verl 0.9.1 log has them, early on and again at the end (tests/fixtures/verl/nccl.log).
TORCHTITAN_WARNING = (
    "\x1b[36m(WorkerDict pid=19864)\x1b[0m /venv/lib/python3.11/site-packages/verl/workers/engine/__init__.py:32: "
    "UserWarning: torchtitan engine is not available: ModuleNotFoundError(\"No module named 'torchtitan'\")"
    "\x1b[32m [repeated 2x across cluster]\x1b[0m\n"
    '\x1b[36m(WorkerDict pid=19864)\x1b[0m   warnings.warn(f"torchtitan engine is not available: {e!r}", '
    "stacklevel=1)\x1b[32m [repeated 2x across cluster]\x1b[0m\n"
)
NCCL = "RuntimeError: Distributed package doesn't have NCCL built in"


def tail_of(path: Path) -> str:
    data = path.read_bytes()
    return data[-LOG_TAIL_BYTES:].decode("utf-8", "replace")


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_real_verl_logs_get_their_kind(name):
    """Real verl 0.9.1 runs (tests/fixtures/verl/README.md), read as the scheduler reads them."""
    expected = MANIFEST[name]
    message = (FIXTURES / f"{name}.message.txt").read_text()
    tail = tail_of(FIXTURES / f"{name}.log")
    assert classify(message, tail) == FailureKind(expected["kind"])
    assert key_error_line(message, tail) == expected["key_error_line"]


def test_every_fixture_is_in_the_manifest():
    logs = {path.name.removesuffix(".log") for path in FIXTURES.glob("*.log")}
    assert logs == set(MANIFEST)
    assert all((FIXTURES / f"{name}.message.txt").exists() for name in MANIFEST)


@pytest.mark.parametrize(
    "text",
    [
        "ValueError: Total available GPUs 8.0 is less than total desired GPUs 16",
        "ValueError: Total available GPUs 4 is less than total desired GPUs 8.",  # older verl: a period
        "(TaskRunner pid=12) ValueError: Total available GPUs 0.0 is less than total desired GPUs 4",
        "\x1b[31mValueError: Total available GPUs \x1b[1m2.0\x1b[0m is less than total desired GPUs 4\x1b[0m",
        VERL_TAIL,
        TORCHTITAN_WARNING + VERL_TAIL + TORCHTITAN_WARNING,
    ],
)
def test_verls_fail_fast_is_a_resource_shortage_wherever_it_appears(text):
    assert classify(text, "") == FailureKind.INSUFFICIENT_RESOURCES
    assert classify("Job entrypoint command failed with exit code 1", text) == FailureKind.INSUFFICIENT_RESOURCES


def test_the_fail_fast_inside_an_actors_error_is_a_shortage():
    tail = (
        TORCHTITAN_WARNING + "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m ray.exceptions.RayTaskError(ValueError): "
        "\x1b[36mray::TaskRunnerV1.run()\x1b[39m (pid=7, ip=10.0.0.2)\n"
        "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m \x1b[31mValueError: Total available GPUs 2.0 is less than total "
        "desired GPUs 4\x1b[0m \x1b[32m[repeated 2x across cluster]\x1b[0m\n"
        "[argus-driver] command exited with code 1\n"
    )
    assert classify("Job entrypoint command failed with exit code 1", tail) == FailureKind.INSUFFICIENT_RESOURCES
    assert key_error_line("", tail) == "ValueError: Total available GPUs 2.0 is less than total desired GPUs 4"


def test_a_warning_naming_a_missing_module_does_not_make_a_crash_a_user_error():
    tail = TORCHTITAN_WARNING + f"(WorkerDict pid=9) {NCCL}\n[argus-driver] command exited with code 1\n"
    assert classify("Job entrypoint command failed with exit code 1", tail) == FailureKind.RUNTIME_ERROR
    assert key_error_line("", tail) == NCCL


def test_warnings_after_the_error_change_nothing():
    # Ray prints deduplicated actor lines late: the warnings can close the log and the job message.
    tail = f'Traceback (most recent call last):\n  File "x.py", line 1\n{NCCL}\n' + TORCHTITAN_WARNING
    assert classify(TORCHTITAN_WARNING, tail) == FailureKind.RUNTIME_ERROR
    assert key_error_line(TORCHTITAN_WARNING, tail) == NCCL


def test_gpu_memory_usage_is_no_argparse_usage():
    tail = f"(WorkerDict pid=9) GPU memory usage: 3 GB\n{NCCL}\n"
    assert classify("exit code 1", tail) == FailureKind.RUNTIME_ERROR


def test_an_argparse_error_is_a_user_error():
    tail = (
        "usage: train.py [-h] [--lr LR]\n"
        "train.py: error: unrecognized arguments: --lr0=1\n"
        "[argus-driver] command exited with code 2\n"
    )
    assert classify("Job entrypoint command failed with exit code 2", tail) == FailureKind.USER_ERROR
    assert key_error_line("", tail) == "train.py: error: unrecognized arguments: --lr0=1"


def test_an_error_line_without_a_usage_line_is_no_argparse_error():
    tail = f"reward: error: retrying\n{NCCL}\nscore: error: none\n"
    assert classify("", tail) == FailureKind.RUNTIME_ERROR


def test_a_missing_module_that_ends_the_run_is_a_user_error():
    tail = (
        TORCHTITAN_WARNING + "Traceback (most recent call last):\n"
        '  File "/job/reward.py", line 1, in <module>\n'
        "    import my_reward_lib\n"
        "ModuleNotFoundError: No module named 'my_reward_lib'\n"
        "[argus-driver] command exited with code 1\n"
    )
    assert classify("exit code 1", tail) == FailureKind.USER_ERROR
    assert key_error_line("", tail) == "ModuleNotFoundError: No module named 'my_reward_lib'"


def test_a_user_module_verl_cannot_load_is_a_user_error():
    # verl's load_module re-raises whatever the user's module raised on import as this RuntimeError.
    tail = (
        "ModuleNotFoundError: No module named 'my_tokenizer_helpers'\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "RuntimeError: Error loading module from module_path='/data/alice/my_dataset.py'\n"
    )
    assert classify("exit code 1", tail) == FailureKind.USER_ERROR
    assert classify("exit code 1", "RuntimeError: Error loading weights from /ckpt\n") == FailureKind.RUNTIME_ERROR


def test_a_missing_file_is_a_user_error():
    tail = "FileNotFoundError: [Errno 2] No such file or directory: '/private/datasets/x.parquet'"
    assert classify("exit code 1", tail) == FailureKind.USER_ERROR


def test_a_file_named_in_passing_does_not_make_a_crash_a_user_error():
    tail = f"(WorkerDict pid=9) cache miss: No such file or directory, building it\n{NCCL}\n"
    assert classify("exit code 1", tail) == FailureKind.RUNTIME_ERROR


def test_hydras_compact_error_is_a_user_error_read_from_its_first_line():
    tail = (
        "Could not override 'trainer.no_such_key'.\n"
        "To append to your config use +trainer.no_such_key=1\n"
        "Key 'no_such_key' is not in struct\n"
        "    full_key: trainer.no_such_key\n"
        "    object_type=dict\n"
        "\n"
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
        "[argus-driver] command exited with code 1\n"
    )
    assert classify("exit code 1", tail) == FailureKind.USER_ERROR
    assert key_error_line("", tail) == "Could not override 'trainer.no_such_key'."


def test_a_config_key_error_raised_by_the_trainer_is_a_user_error():
    tail = "omegaconf.errors.ConfigAttributeError: Key 'rollout_n' is not in struct\n    full_key: rollout_n\n"
    assert classify("", tail) == FailureKind.USER_ERROR


def test_the_wrapper_names_the_error_when_nothing_follows_it():
    tail = "ray.exceptions.RayTaskError(FileNotFoundError): ray::TaskRunnerV1.run() (pid=7, ip=10.0.0.2)\n"
    assert classify("", tail) == FailureKind.USER_ERROR


def test_an_error_ignored_at_shutdown_is_not_the_one_that_ended_the_run():
    tail = (
        f"{NCCL}\n"
        "Exception ignored in: <function Worker.__del__ at 0x7f>\n"
        "Traceback (most recent call last):\n"
        '  File "w.py", line 9, in __del__\n'
        "ModuleNotFoundError: import of torch halted; None in sys.modules\n"
    )
    assert classify("", tail) == FailureKind.RUNTIME_ERROR
    assert key_error_line("", tail) == NCCL


def test_nccl_is_a_runtime_error_not_a_shortage():
    tail = f"(WorkerDict pid=9) {NCCL} [repeated 7x across cluster]"
    assert classify("exit code 1", tail) == FailureKind.RUNTIME_ERROR
    assert key_error_line("", tail) == NCCL


def test_nothing_to_go_on_is_unknown():
    assert classify("", "") == FailureKind.UNKNOWN


def test_a_run_killed_without_an_error_is_unknown_and_says_how_it_ended():
    tail = "step:3 - actor/pg_loss:0.1\n[argus-driver] command exited with code -9\n"
    assert classify("", tail) == FailureKind.UNKNOWN
    assert key_error_line("", tail) == "[argus-driver] command exited with code -9"
    assert key_error_line("Job entrypoint command failed with exit code 137", tail).endswith("exit code 137")


def test_the_key_line_is_the_last_error_line():
    assert key_error_line("", VERL_TAIL) == "ValueError: Total available GPUs 8.0 is less than total desired GPUs 16"


def test_trim_keeps_the_end_without_colours():
    text = "\x1b[31m" + "x" * 5000 + "the cause\x1b[0m"
    trimmed = trim(text, limit=100)
    assert trimmed.endswith("the cause") and len(trimmed) == 101 and "\x1b" not in trimmed
