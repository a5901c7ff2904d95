"""The scheduler's tick against Ray's job history: with 0 and with N finished jobs in Ray.

    .venv/bin/python bench/ray_history.py [--history 2000] [--live 4] [--ticks 20]

Starts, on this host and stopped here by pid: a Ray head and one worker declaring 4 GPUs
(devkit/ray_cluster.py), with the bench's own SQLite database and shared root. ``--live`` tasks
run the stand-in trainer for the whole bench (1 GPU each, a step every second), so each tick
has live attempts to follow.

Measured, first on a fresh head, then after N finished jobs are added to Ray's history:
- tick: the scheduler's tick (tasks.scheduler.tick.tick) between sweeps, median of --ticks;
- sweep: a tick that also sweeps Ray's job table (every ARGUS_RAY_SWEEP_S), median of 5;
- list_jobs and get_job_info: the raw SDK calls, median of --ticks each.

The history is written the way Ray's job server keeps it: one JobInfo record per finished job
in the GCS key-value store (namespace "job"), here through a driver's internal_kv, since
running N real jobs would take this 2-core machine the better part of an hour. list_jobs reads
those records exactly as it reads real ones. They carry no Argus metadata (another user's jobs):
retention never deletes them, so the sweep pays for them each time; Argus's own finished jobs
are deleted after ARGUS_RAY_JOB_RETENTION_S and do not accumulate.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine_note, make_user, ms, ray_bench, table
from devkit.ray_cluster import cluster_env
from devkit.wait import wait_for

WRITE_HISTORY = textwrap.dedent(
    """
    import json, sys, time, uuid
    import ray
    from ray.dashboard.modules.job.common import JobInfo, JobInfoStorageClient
    from ray.experimental.internal_kv import _internal_kv_put
    from ray.job_submission import JobStatus

    ray.init(address=sys.argv[1], logging_level="ERROR")
    now = int(time.time() * 1000)
    for i in range(int(sys.argv[2])):
        sid = f"history-{i:05d}-{uuid.uuid4().hex[:6]}"
        info = JobInfo(status=JobStatus.SUCCEEDED, entrypoint="python3 train.py", message="Job finished successfully.",
                       start_time=now - 60_000, end_time=now - 30_000, driver_exit_code=0, metadata={"owner": "carol"})
        key = JobInfoStorageClient.JOB_DATA_KEY.format(job_id=sid)
        _internal_kv_put(key, json.dumps(info.to_json()), overwrite=True, namespace="job")
    """
)


def median_ms(samples: list[float]) -> float:
    return ms(statistics.median(samples))


def measure(ray_client: Any, ticks: int, live_ids: list[str]) -> dict[str, float]:
    from django.test import override_settings

    from tasks.scheduler.tick import tick

    with override_settings(ARGUS_RAY_SWEEP_S=10**9):
        tick_times = []
        for _ in range(ticks):
            report = tick()
            assert report.reachable and not report.swept, report
            tick_times.append(report.seconds)
    sweep_times = []
    for _ in range(5):
        report = tick(force_sweep=True)
        assert report.swept, report
        sweep_times.append(report.seconds)
    list_times, info_times = [], []
    for _ in range(ticks):
        started = time.perf_counter()
        count = len(ray_client.list_jobs())
        list_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        ray_client.get_job_info(live_ids[0])
        info_times.append(time.perf_counter() - started)
    return {
        "jobs in Ray": count,
        "tick": median_ms(tick_times),
        "sweep": median_ms(sweep_times),
        "list_jobs": median_ms(list_times),
        "get_job_info": median_ms(info_times),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", type=int, default=2000, help="finished jobs added to Ray's history")
    parser.add_argument("--live", type=int, default=4, help="live tasks followed by each tick (1 GPU each, <= 4)")
    parser.add_argument("--ticks", type=int, default=20)
    args = parser.parse_args()

    # The live tasks' jobs stop with the cluster, at the end.
    with ray_bench("ray_history") as (bench, cluster):
        from ray.job_submission import JobSubmissionClient

        from devkit.standin import standin_spec
        from tasks.choices import TaskState
        from tasks.models import Task
        from tasks.scheduler.tick import tick
        from tasks.specs.parse import parse_spec
        from tasks.submit import create_task

        print(f"bench dir {bench.dir}; {machine_note()}", flush=True)

        user, _ = make_user("alice")
        tasks = [
            create_task(user, parse_spec(standin_spec(gpus=1, steps=100000, step_s=1), username="alice"), "bench")
            for _ in range(args.live)
        ]
        wait_for(
            lambda: tick() and all(Task.objects.get(pk=t.pk).state == TaskState.RUNNING for t in tasks),
            "the live tasks to run",
            timeout=180,
            interval=0.5,
        )
        client = JobSubmissionClient(cluster.job_server_url)
        live_ids = [t.attempts.get().ray_submission_id for t in tasks]
        rows = []
        before = measure(client, args.ticks, live_ids)
        rows.append(["fresh head", *before.values()])
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", WRITE_HISTORY, cluster.gcs_address, str(args.history)],
            env=cluster_env(),
            check=True,
        )
        print(f"wrote {args.history} finished jobs in {time.perf_counter() - started:.1f} s", flush=True)
        after = measure(client, args.ticks, live_ids)
        rows.append([f"+{args.history:,} finished jobs", *after.values()])
        rows.append(["ratio", "", *(round(after[k] / before[k], 2) for k in list(before)[1:])])
        print(f"\n=== the tick with Ray's job history, {args.live} live attempts, real Ray ===")
        print(machine_note())
        print(table(["Ray's history", "jobs in Ray", "tick ms", "sweep ms", "list_jobs ms", "get_job_info ms"], rows))
        print(
            f"tick: median of {args.ticks} ticks between sweeps (one get_job_info per live attempt); sweep: a tick\n"
            "that also reads the whole job table (every ARGUS_RAY_SWEEP_S, 5 s by default). Before this change\n"
            "every tick called list_jobs."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
