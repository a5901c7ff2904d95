from __future__ import annotations

import pytest

from tasks.models import FailureKind
from tasks.scheduler.failures import classify, key_error_line, trim

VERL_TAIL = (
    "\x1b[36m(TaskRunnerV1 pid=3165)\x1b[0m Using dataset class: RLHFDataset\n"
    "ray.exceptions.RayTaskError(ValueError): \x1b[36mray::TaskRunnerV1.run()\x1b[39m (pid=3165, ip=10.0.0.2)\n"
    '  File "verl/single_controller/ray/base.py", line 120, in _check_resource_available\n'
    "ValueError: Total available GPUs 8.0 is less than total desired GPUs 16\n"
    "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
)


@pytest.mark.parametrize(
    "text",
    [
        "ValueError: Total available GPUs 8.0 is less than total desired GPUs 16",
        "ValueError: Total available GPUs 4 is less than total desired GPUs 8.",  # older verl: a period
        "(TaskRunner pid=12) ValueError: Total available GPUs 0.0 is less than total desired GPUs 4",
        "\x1b[31mValueError: Total available GPUs \x1b[1m2.0\x1b[0m is less than total desired GPUs 4\x1b[0m",
        VERL_TAIL,
    ],
)
def test_verls_fail_fast_is_a_resource_shortage_wherever_it_appears(text):
    assert classify(text, "") == FailureKind.INSUFFICIENT_RESOURCES
    assert classify("Job entrypoint command failed with exit code 1", text) == FailureKind.INSUFFICIENT_RESOURCES


def test_a_missing_file_is_a_user_error():
    tail = "FileNotFoundError: [Errno 2] No such file or directory: '/private/datasets/x.parquet'"
    assert classify("exit code 1", tail) == FailureKind.USER_ERROR


def test_nccl_is_a_runtime_error_not_a_shortage():
    tail = (
        "(WorkerDict pid=9) RuntimeError: Distributed package doesn't have NCCL built in [repeated 7x across cluster]"
    )
    assert classify("exit code 1", tail) == FailureKind.RUNTIME_ERROR
    assert key_error_line("", tail).startswith("RuntimeError: Distributed package")


def test_nothing_to_go_on_is_unknown():
    assert classify("", "") == FailureKind.UNKNOWN


def test_the_key_line_is_the_last_error_line():
    assert key_error_line("", VERL_TAIL) == "ValueError: Total available GPUs 8.0 is less than total desired GPUs 16"


def test_trim_keeps_the_end_without_colours():
    text = "\x1b[31m" + "x" * 5000 + "the cause\x1b[0m"
    trimmed = trim(text, limit=100)
    assert trimmed.endswith("the cause") and len(trimmed) == 101 and "\x1b" not in trimmed
