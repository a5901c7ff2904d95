"""The stand-in trainer's checkpoints, hangs and crashes on a real Ray cluster, submitted as
tasks/scheduler/launch.py submits (the driver wrapper, a worker node), and read back through
tasks/logs/driverlog.py as the scheduler will read them."""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from devkit.ray_cluster import LocalRayCluster, infeasible_request
from devkit.wait import wait_for
from raypool.config import WORKER_RESOURCE
from tasks.logs.driverlog import ResumeInfo, placement_stuck, resumed_from
from tasks.logs.lines import clean_lines
from tasks.logs.logfile import read_new

pytestmark = pytest.mark.ray

# A training step's metrics line: not verl's validation before training ("step:0 - val-core/…", or
# at the step it resumed from), which the stand-in logs as verl does.
STEP = re.compile(r"^step:(\d+) - (?!val-)")


def submit(cluster: LocalRayCluster, log: Path, *overrides: str, module: str = "main_ppo") -> str:
    argv = ["python3", "-m", f"verl.trainer.{module}", "trainer.nnodes=1", "trainer.n_gpus_per_node=4", *overrides]
    entrypoint = shlex.join(["python3", "-m", "raypool.driver", "--log", str(log), "--", *argv])
    client = JobSubmissionClient(cluster.job_server_url)
    return client.submit_job(entrypoint=entrypoint, entrypoint_resources={WORKER_RESOURCE: 1})


def wait_for_end(cluster: LocalRayCluster, job: str, timeout: float = 90) -> JobStatus:
    client = JobSubmissionClient(cluster.job_server_url)

    def ended() -> JobStatus | None:
        status = client.get_job_status(job)
        return status if status.is_terminal() else None

    return wait_for(ended, f"{job} to end", timeout=timeout, interval=0.3)


def stop(cluster: LocalRayCluster, job: str) -> JobStatus:
    JobSubmissionClient(cluster.job_server_url).stop_job(job)
    return wait_for_end(cluster, job, timeout=30)


def steps_in(log: Path) -> list[int]:
    # On one host with several nodes Ray prints every actor line twice: the set of steps counts.
    return sorted({int(m[1]) for line in clean_lines(log.read_text()) if (m := STEP.match(line))})


def follow(log: Path, until, timeout: float = 60) -> str:
    """Read the log as sync will, a few KB at a time, until ``until(text so far)`` holds."""
    text, offset = "", 0

    def read_on() -> bool:
        nonlocal text, offset
        new, offset, _ = read_new(log, offset, 4096)
        text += new
        return bool(until(text))

    try:
        wait_for(read_on, f"a line in {log.name}", timeout=timeout, interval=0.3)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; the log so far:\n{text[-3000:]}") from None
    return text


@pytest.mark.parametrize("module", ["main_ppo", "sft_trainer_ray"])
def test_a_crashed_run_resumes_from_its_last_checkpoint(on_ray, tmp_path, module):
    folder = tmp_path / "users/alice/jobs/t1/checkpoints"
    common = ["+standin.steps=8", "+standin.step_s=0.1", f"trainer.default_local_dir={folder}", "trainer.save_freq=2"]
    ppo = module == "main_ppo"

    first_log = tmp_path / "a01.log"
    first = submit(on_ray, first_log, *common, "+standin.exit_after=5", module=module)
    assert wait_for_end(on_ray, first) == JobStatus.FAILED
    assert sorted(p.name for p in folder.iterdir()) == [
        "global_step_2",
        "global_step_4",
        "latest_checkpointed_iteration.txt",
    ]
    assert (folder / "latest_checkpointed_iteration.txt").read_text() == "4"
    assert (folder / ("global_step_4/data.pt" if ppo else "global_step_4/data_0.pt")).is_file()
    assert steps_in(first_log) == [1, 2, 3, 4, 5]
    first_text = first_log.read_text()
    started = resumed_from(first_text)
    assert started is not None and started.from_scratch
    assert (started.line == "Training from scratch") if ppo else started.line.startswith("step:1 - ")
    assert "ray.exceptions.ActorDiedError" in first_text
    assert first_text.endswith("[argus-driver] command exited with code 1\n")

    second_log = tmp_path / "a02.log"
    second = submit(on_ray, second_log, *common, module=module)
    assert wait_for_end(on_ray, second) == JobStatus.SUCCEEDED
    lines = clean_lines(second_log.read_text())
    if ppo:
        at = lines.index(f"Load from checkpoint folder: {folder}/global_step_4")
        assert lines[at + 1 : at + 3] == ["Setting global step to 4", f"Resuming from {folder}/global_step_4"]
    assert resumed_from(second_log.read_text()) == ResumeInfo(
        4, "Setting global step to 4" if ppo else f"Found latest checkpoint: {folder}/global_step_4 (step 4)"
    )
    assert steps_in(second_log) == [5, 6, 7, 8]
    assert (folder / "latest_checkpointed_iteration.txt").read_text() == "8"  # the last step saves too
    assert {p.name for p in folder.glob("global_step_*")} == {f"global_step_{n}" for n in (2, 4, 6, 8)}


def test_a_node_without_the_cpus_leaves_the_run_waiting_with_the_autoscalers_error(on_ray, tmp_path):
    # 4 bundles of {"CPU": 4, "GPU": 1} in one STRICT_PACK group: 16 CPUs, the workers have 14.
    log = tmp_path / "a01.log"
    job = submit(on_ray, log, "+standin.cpus_per_gpu=4")
    try:
        text = follow(log, placement_stuck)
        assert JobSubmissionClient(on_ray.job_server_url).get_job_status(job) == JobStatus.RUNNING
        assert infeasible_request(placement_stuck(text)) == {"CPU": 16.0, "GPU": 4.0}
        assert resumed_from(text) is None  # verl never reached its trainer
        assert steps_in(log) == []
    finally:
        assert stop(on_ray, job) == JobStatus.STOPPED


def test_a_stalled_run_stays_running_and_its_log_stops_growing(on_ray, tmp_path):
    log = tmp_path / "a01.log"
    job = submit(on_ray, log, "+standin.steps=8", "+standin.step_s=0.1", "+standin.stall_after=2")
    try:
        follow(log, lambda text: any(line.startswith("step:2 - ") for line in clean_lines(text)))

        # On one host Ray passes each actor line once per node: step 2's line has come through
        # every node that passed step 1's, so what the run printed before its stall is all here.
        def lines(step: int) -> int:
            return sum(line.startswith(f"step:{step} - ") for line in clean_lines(log.read_text()))

        wait_for(lambda: lines(2) >= lines(1) > 0, "step 2's line from every node", timeout=60)
        offset = log.stat().st_size
        # Unstalled, the run prints steps 3 to 8 one step_s apart; ten steps' time for them to show
        # (well under the 2 s no test sleeps: the condition is the run's own pace, not a window).
        time.sleep(10 * 0.1)
        assert read_new(log, offset, 4096) == ("", offset, False)
        assert JobSubmissionClient(on_ray.job_server_url).get_job_status(job) == JobStatus.RUNNING
        assert steps_in(log) == [1, 2]
    finally:
        assert stop(on_ray, job) == JobStatus.STOPPED
