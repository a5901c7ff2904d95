"""Steps recomputed after an interruption, for a few save_freq values, on real Ray.

    .venv/bin/python bench/resume.py [--save-freq 2 5 10] [--runs 3] [--steps 40] [--seed 1]

Starts, on this host and stopped here by pid: a Ray head and one worker declaring 4 GPUs and 14
CPUs (devkit/ray_cluster.py), with the bench's own SQLite database and shared root. Each run is a
basic PPO task (the stand-in trainer answers to verl.trainer.main_ppo: a step every 0.2 s,
checkpoints and resume as verl's) with ``total_training_steps`` and ``save_freq`` and
``max_retries: 1``, driven by the scheduler's own tick, as qcluster drives it. Once attempt 1's
driver.log shows a step drawn at random, its Ray job is stopped by hand (``stop_job``, as an
operator would); the scheduler retries it and attempt 2 resumes from the task's checkpoints.

Counted from the two driver.logs: steps logged by both attempts (recomputed), steps logged by
neither (lost from the curves), how far attempt 1 went after the stop was sent, and the step
attempt 2 resumed from. Goal: at most save_freq steps recomputed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import PPO_SPEC, machine_note, make_user, ray_bench, table
from devkit.wait import wait_for


@dataclass
class Run:
    save_freq: int
    stopped_at: int  # the step attempt 1's log showed when stop_job was sent
    reached: int  # the last step attempt 1 logged
    resumed_from: int | None
    recomputed: int  # steps logged by both attempts
    lost: int  # steps logged by neither
    stop_s: float  # stop_job sent -> Ray reports the job STOPPED


def logged_steps(path: str) -> set[int]:
    from tasks.logs.lines import METRIC_LINE, clean_lines

    text = Path(path).read_text(errors="replace") if Path(path).exists() else ""
    return {int(m["step"]) for line in clean_lines(text) if (m := METRIC_LINE.search(line))}


def tick_until(predicate, timeout: float, what: str):
    from tasks.scheduler.tick import tick

    return wait_for(lambda: tick() and predicate(), what, timeout=timeout, interval=0.3)


def one_run(user, client, save_freq: int, steps: int, stop_at: int) -> Run:
    from ray.job_submission import JobStatus

    from tasks.choices import TaskState
    from tasks.specs.parse import parse_spec
    from tasks.submit import create_task

    spec = PPO_SPEC + f"total_training_steps: {steps}\nsave_freq: {save_freq}\nmax_retries: 1\n"
    task = create_task(user, parse_spec(spec, username=user.username), "bench")

    def state() -> str:
        task.refresh_from_db()
        return task.state

    tick_until(lambda: state() == TaskState.RUNNING, 120, "attempt 1 to run")
    first = task.attempts.get()
    # Watched closely, not at the tick's pace: the stop goes out as soon as the step is logged.
    wait_for(lambda: stop_at in logged_steps(first.log_path), f"step {stop_at}", timeout=120, interval=0.05)
    sent = time.monotonic()
    client.stop_job(first.ray_submission_id)
    wait_for(lambda: client.get_job_status(first.ray_submission_id) == JobStatus.STOPPED, "the stop", timeout=30)
    stop_s = time.monotonic() - sent
    tick_until(lambda: state() in (TaskState.SUCCEEDED, TaskState.FAILED), 180, "the retry to end")
    assert task.state == TaskState.SUCCEEDED, (task.state, task.error_summary)
    second = task.attempts.get(attempt_no=2)
    one, two = logged_steps(first.log_path), logged_steps(second.log_path)
    return Run(
        save_freq=save_freq,
        stopped_at=stop_at,
        reached=max(one),
        resumed_from=second.resumed_from_step,
        recomputed=len(one & two),
        lost=len(set(range(1, steps + 1)) - one - two),
        stop_s=stop_s,
    )


def row(save_freq: int, runs: list[Run]) -> list[object]:
    return [
        save_freq,
        " ".join(str(run.stopped_at) for run in runs),
        " ".join(str(run.reached - run.stopped_at) for run in runs),
        " ".join(str(run.resumed_from) for run in runs),
        " ".join(str(run.recomputed) for run in runs),
        max(run.recomputed for run in runs),
        sum(run.lost for run in runs),
        round(statistics.median(run.stop_s for run in runs), 2),
        "yes" if all(run.recomputed <= save_freq for run in runs) else "NO",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--save-freq", type=int, nargs="+", default=[2, 5, 10])
    parser.add_argument("--runs", type=int, default=3, help="interruptions per save_freq")
    parser.add_argument("--steps", type=int, default=40, help="total_training_steps of each task")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    with ray_bench("resume") as (bench, cluster):
        from django.conf import settings
        from ray.job_submission import JobSubmissionClient

        settings.ARGUS_RETRY_INTERVAL_S = 1
        print(f"bench dir {bench.dir}; {machine_note()}", flush=True)
        user, _ = make_user("alice")
        client = JobSubmissionClient(cluster.job_server_url)
        runs: list[Run] = []
        for save_freq in args.save_freq:
            for _ in range(args.runs):
                # Late enough to follow a checkpoint, early enough to stop before the end.
                run = one_run(user, client, save_freq, args.steps, rng.randint(save_freq + 1, args.steps - 10))
                print(run, flush=True)
                runs.append(run)
    print(f"\n=== steps recomputed after an interruption, {args.steps}-step tasks, 0.2 s a step, real Ray ===")
    print(machine_note())
    headers = ["save_freq", "stopped at", "steps after stop", "resumed from"]
    headers += ["recomputed", "max", "lost", "stop s (median)", "<= save_freq"]
    rows = [row(freq, [run for run in runs if run.save_freq == freq]) for freq in args.save_freq]
    print(table(headers, rows))
    print(
        "stopped at: the step attempt 1's log showed when stop_job was sent; steps after stop: how much\n"
        "further it logged before Ray's stop took (SIGTERM, SIGKILL after 3 s); recomputed: steps logged by\n"
        "both attempts; lost: steps logged by neither (a checkpoint written, its step's line never logged)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
