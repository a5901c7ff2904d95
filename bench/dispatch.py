"""Dispatch and hand-over latency on a real local Ray cluster, through the whole system.

    .venv/bin/python bench/dispatch.py [--rounds 20] [--handovers 10] [--tick-s SECONDS]

Starts, all on this host and all stopped here by pid: a Ray head and 2 workers declaring 4 GPUs
each (devkit/ray_cluster.py), `manage.py qcluster` (the scheduler, as in production) and gunicorn
(2 workers), against a temp SQLite database and shared root of its own. Tasks run the stand-in
verl trainer (tests/standin) through the real driver wrapper.

1. Dispatch, idle cluster and idle scheduler (no ticker running: each POST goes through django-q):
   the time from sending POST /api/v2/tasks to the Ray job existing, seen by polling
   get_job_info every 20 ms ("seen") and by the job's own start_time in Ray ("created"); median
   of --rounds, each task (1 GPU, 1 step) run to its end before the next. Beside it, in the same
   run and interleaved with it, raw JobSubmissionClient.submit_job of a trivial job (the call's
   duration), and the ratio.
2. Hand-over: --handovers + 1 tasks that each need the whole cluster (2 nodes x 4 GPUs), POSTed
   together so they run strictly one after another: from a job's end (its Ray end_time) to the next
   task's Ray job existing (its start_time); median. Their lengths are random (2 steps of 0.1-1.1 s)
   so that their ends fall anywhere in the ticker's cycle.

Goals (issue 3): dispatch <= 0.5 s median, hand-over <= 2 s median. --tick-s sets ARGUS_TICK_S
(how often the running ticker looks at Ray; the production default is used when not given).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    ROOT,
    Gunicorn,
    isolated_env,
    machine_note,
    make_user,
    migrate,
    ms,
    post_spec,
    setup_django,
    stop_process,
    table,
)
from devkit.wait import wait_for
from raypool.config import WORKER_RESOURCE

GOAL_DISPATCH_S = 0.5
GOAL_HANDOVER_S = 2.0
POLL_S = 0.02


def standin_spec(nnodes: int = 1, gpus: int = 4, *, steps: int = 3, step_s: float = 0.2) -> str:
    """The spec tests/scheduler/conftest.py's standin_spec builds (an advanced spec)."""
    return (
        "kind: advanced\nworkload: ppo\n"
        f"nnodes: {nnodes}\nn_gpus_per_node: {gpus}\n"
        f"command: python3 -m verl.trainer.main_ppo trainer.nnodes={nnodes} trainer.n_gpus_per_node={gpus}"
        f" +standin.steps={steps} +standin.step_s={step_s}\n"
    )


def free_gpus(gcs_address: str) -> float:
    from ray.autoscaler.v2.sdk import get_cluster_status

    status = get_cluster_status(gcs_address, timeout=5)
    return sum(u.total - u.used for u in status.cluster_resource_usage if u.resource_name == "GPU")


def job_or_none(client: Any, submission_id: str) -> Any:
    try:
        return client.get_job_info(submission_id)
    except RuntimeError as error:  # 404 until it exists
        if "does not exist" in str(error):
            return None
        raise


def wait_terminal(client: Any, submission_id: str, timeout: float = 120) -> Any:
    return wait_for(
        lambda: (job := client.get_job_info(submission_id)).status.is_terminal() and job,
        f"job {submission_id} to end",
        timeout=timeout,
        interval=0.1,
    )


def wait_idle(cluster: Any, timeout: float = 60) -> None:
    """All 8 GPUs free in Ray, and no ticker running (the lease released)."""
    from tasks.lease import tick_lease

    wait_for(lambda: free_gpus(cluster.gcs_address) == 8, "8 free GPUs", timeout=timeout)
    wait_for(lambda: not tick_lease().exclude(holder="").exists(), "the ticker to stop", timeout=timeout, interval=0.1)


def has_state(task_id: str, state: str) -> bool:
    from tasks.models import Task

    return Task.objects.filter(task_id=task_id, state=state).exists()


# --- 1. dispatch, beside raw submit_job --------------------------------------------------------


def dispatch_rounds(server: Gunicorn, token: str, cluster: Any, client: Any, rounds: int) -> dict[str, list[float]]:
    from tasks.attempts import Attempt

    out: dict[str, list[float]] = {k: [] for k in ("raw", "raw_created", "seen", "created", "api", "admit", "submit")}
    for i in range(rounds):
        wait_idle(cluster)
        # Raw Ray: the submit_job call itself, a trivial job, same entrypoint resources as Argus.
        submission_id = f"bench-raw-{os.getpid()}-{i:03d}"
        started = time.time()
        client.submit_job(entrypoint="true", submission_id=submission_id, entrypoint_resources={WORKER_RESOURCE: 1})
        out["raw"].append(time.time() - started)
        raw = wait_terminal(client, submission_id)
        out["raw_created"].append(raw.start_time / 1000 - started)
        wait_idle(cluster)

        # Argus: POST -> the Ray job exists.
        started = time.time()
        code, body, _ = post_spec(server.url, token, standin_spec(1, 1, steps=1, step_s=0.01))
        if code != 201:
            raise RuntimeError(f"POST answered {code}: {body}")
        submission_id = f"{body['task_id']}--a01"
        wait_for(
            functools.partial(job_or_none, client, submission_id),
            f"{submission_id} on Ray",
            timeout=60,
            interval=POLL_S,
        )
        out["seen"].append(time.time() - started)
        job = wait_terminal(client, submission_id)
        out["created"].append(job.start_time / 1000 - started)
        attempt = Attempt.objects.select_related("task").get(ray_submission_id=submission_id)
        out["api"].append(attempt.task.created_at.timestamp() - started)
        out["admit"].append((attempt.created_at - attempt.task.created_at).total_seconds())
        out["submit"].append(job.start_time / 1000 - attempt.created_at.timestamp())
        wait_for(
            functools.partial(has_state, body["task_id"], "SUCCEEDED"), f"{body['task_id']} to succeed", timeout=60
        )
        print(
            f"  round {i + 1:2}: raw submit_job {ms(out['raw'][-1]):6.1f} ms, "
            f"Argus POST -> job seen {ms(out['seen'][-1]):6.1f} ms (created {ms(out['created'][-1]):6.1f} ms)",
            flush=True,
        )
    return out


# --- 2. hand-over ------------------------------------------------------------------------------


def handovers(server: Gunicorn, token: str, cluster: Any, client: Any, count: int) -> dict[str, list[float]]:
    from tasks.attempts import Attempt
    from tasks.models import Task

    wait_idle(cluster)
    # Jobs of one fixed length would end at the same point of the ticker's cycle every time and
    # measure one phase of it: each runs 2 steps of a random 0.1-1.1 s, spreading its end over a
    # whole ARGUS_TICK_S (the default 2 s) and more.
    rng = random.Random(20)
    task_ids = []
    for _ in range(count + 1):
        spec = standin_spec(2, 4, steps=2, step_s=round(rng.uniform(0.1, 1.1), 2))
        code, body, _ = post_spec(server.url, token, spec)
        if code != 201:
            raise RuntimeError(f"POST answered {code}: {body}")
        task_ids.append(body["task_id"])
    wait_for(
        lambda: (
            Task.objects.filter(task_id__in=task_ids, state__in=["SUCCEEDED", "FAILED", "CANCELED"]).count()
            == len(task_ids)
        ),
        "the whole-cluster tasks to end",
        timeout=60 * (count + 1),
        interval=0.5,
    )
    failed = list(Task.objects.filter(task_id__in=task_ids).exclude(state="SUCCEEDED").values_list("task_id", "state"))
    attempts = list(Attempt.objects.filter(task__task_id__in=task_ids).select_related("task"))
    if failed or len(attempts) != len(task_ids):
        print(f"  WARNING: not all ran once and succeeded: {failed}; {len(attempts)} attempts")
    runs = []
    for attempt in attempts:
        job = client.get_job_info(attempt.ray_submission_id)
        runs.append((job.start_time / 1000, job.end_time / 1000, attempt))
    runs.sort(key=lambda run: run[0])
    out: dict[str, list[float]] = {"handover": [], "noticed": [], "admitted": [], "submitted": [], "overlap": []}
    for (_, end, previous), (start, _, following) in itertools.pairwise(runs):
        out["handover"].append(start - end)
        # When Argus recorded the end (the task's finished_at), admitted the next (its attempt row)
        # and submitted it (the job's start_time in Ray).
        assert previous.task.finished_at is not None  # every task ended (waited for above)
        noticed = previous.task.finished_at.timestamp()
        admitted = following.created_at.timestamp()
        out["noticed"].append(noticed - end)
        out["admitted"].append(admitted - noticed)
        out["submitted"].append(start - admitted)
        if start < end:
            out["overlap"].append(end - start)
    for i, value in enumerate(out["handover"], 1):
        print(
            f"  hand-over {i:2}: {value:6.3f} s = end noticed {out['noticed'][i - 1]:6.3f} s + next admitted "
            f"{out['admitted'][i - 1]:6.3f} s + submitted {out['submitted'][i - 1]:6.3f} s"
        )
    return out


# --- main --------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20, help="dispatch rounds (default 20)")
    parser.add_argument("--handovers", type=int, default=10, help="hand-overs measured (default 10)")
    parser.add_argument("--tick-s", type=float, default=None, help="ARGUS_TICK_S for qcluster (default: settings)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (database, logs)")
    args = parser.parse_args()

    bench = isolated_env("dispatch", keep=args.keep)
    from devkit.ray_cluster import LocalRayCluster

    cluster = LocalRayCluster()
    extra = {
        "ARGUS_RAY_JOB_SERVER_URL": cluster.job_server_url,
        "ARGUS_RAY_GCS_ADDRESS": cluster.gcs_address,
        "ARGUS_RAY_TOKEN_FILE": str(cluster.token_file),  # the cluster demands it, as production's do
    }
    if args.tick_s is not None:
        extra["ARGUS_TICK_S"] = str(args.tick_s)
    os.environ.update(extra)
    setup_django()
    migrate()
    from django.conf import settings
    from ray.job_submission import JobSubmissionClient

    _, token = make_user("alice")
    print(f"bench dir {bench.dir}; {machine_note()}", flush=True)
    server = qcluster = None
    log = None
    try:
        started = time.monotonic()
        cluster.start_head()
        for _ in range(2):
            cluster.add_worker(gpus=4)  # one at a time: two raylets starting together collide
            cluster.wait_for_gpus(4 * len(cluster.workers))
        print(f"Ray: head + 2 workers x 4 GPUs up in {time.monotonic() - started:.1f} s", flush=True)
        env = bench.env(**extra)
        log = (bench.dir / "qcluster.log").open("wb")
        qcluster = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        server = Gunicorn(env, workers=2, log=bench.dir / "gunicorn.log")
        client = JobSubmissionClient(cluster.job_server_url)
        time.sleep(3)  # qcluster's start-up

        # Warm-up, not measured: the first tick in each of qcluster's two worker processes imports
        # Ray's SDKs and opens its connections (a fresh worker's first dispatch takes 1-2 s), and
        # the first jobs warm the nodes. Which worker takes a tick is up to django-q: three tasks,
        # one after the other, nearly always reach both.
        for done in range(1, 4):
            post_spec(server.url, token, standin_spec(1, 1, steps=1, step_s=0.01))
            wait_for(functools.partial(finished_at_least, done), "the warm-up tasks", timeout=300)
            wait_idle(cluster)

        load_start = machine_note()
        print(f"\n1. dispatch, {args.rounds} rounds (ARGUS_TICK_S={settings.ARGUS_TICK_S})", flush=True)
        dispatch = dispatch_rounds(server, token, cluster, client, args.rounds)
        print(f"\n2. hand-over, {args.handovers + 1} whole-cluster tasks", flush=True)
        handover = handovers(server, token, cluster, client, args.handovers)
        load_end = machine_note()
    except BaseException:
        diagnose(cluster)
        for name in ("qcluster.log", "gunicorn.log"):
            path = bench.dir / name
            if path.exists():
                print(f"--- last lines of {path}", file=sys.stderr)
                print("\n".join(path.read_text(errors="replace").splitlines()[-30:]), file=sys.stderr)
        raise
    finally:
        if server is not None:
            server.stop()
        if qcluster is not None:
            stop_process(qcluster)
        if log is not None:
            log.close()
        cluster.stop()

    def med(values: list[float]) -> float:
        return statistics.median(values)

    raw = med(dispatch["raw"])
    rows = [
        ["raw submit_job call (trivial job)", len(dispatch["raw"]), ms(raw), ms(max(dispatch["raw"])), "", ""],
        [
            "raw: call start -> job created (Ray start_time)",
            len(dispatch["raw_created"]),
            ms(med(dispatch["raw_created"])),
            ms(max(dispatch["raw_created"])),
            "",
            "",
        ],
        [
            "Argus: POST -> job seen (get_job_info poll)",
            len(dispatch["seen"]),
            ms(med(dispatch["seen"])),
            ms(max(dispatch["seen"])),
            "<= 500",
            "yes" if med(dispatch["seen"]) <= GOAL_DISPATCH_S else "NO",
        ],
        [
            "Argus: POST -> job created (Ray start_time)",
            len(dispatch["created"]),
            ms(med(dispatch["created"])),
            ms(max(dispatch["created"])),
            "<= 500",
            "yes" if med(dispatch["created"]) <= GOAL_DISPATCH_S else "NO",
        ],
        [
            "  of which POST -> task row",
            len(dispatch["api"]),
            ms(med(dispatch["api"])),
            ms(max(dispatch["api"])),
            "",
            "",
        ],
        [
            "  of which task row -> attempt row (django-q, tick)",
            len(dispatch["admit"]),
            ms(med(dispatch["admit"])),
            ms(max(dispatch["admit"])),
            "",
            "",
        ],
        [
            "  of which attempt row -> job created (submit)",
            len(dispatch["submit"]),
            ms(med(dispatch["submit"])),
            ms(max(dispatch["submit"])),
            "",
            "",
        ],
        [
            "hand-over: job end -> next job created",
            len(handover["handover"]),
            ms(med(handover["handover"])),
            ms(max(handover["handover"])),
            "<= 2000",
            "yes" if handover["handover"] and med(handover["handover"]) <= GOAL_HANDOVER_S else "NO",
        ],
        [
            "  of which job end -> Argus saw it end",
            len(handover["noticed"]),
            ms(med(handover["noticed"])),
            ms(max(handover["noticed"])),
            "",
            "",
        ],
        [
            "  of which Argus saw it end -> next attempt row",
            len(handover["admitted"]),
            ms(med(handover["admitted"])),
            ms(max(handover["admitted"])),
            "",
            "",
        ],
        [
            "  of which next attempt row -> next job created",
            len(handover["submitted"]),
            ms(med(handover["submitted"])),
            ms(max(handover["submitted"])),
            "",
            "",
        ],
    ]
    print("\n=== dispatch and hand-over: real Ray (head + 2 x 4 GPUs), qcluster, gunicorn -w 2, SQLite ===")
    print(f"ARGUS_TICK_S={settings.ARGUS_TICK_S}; start: {load_start}\n{' ' * 22}end:   {load_end}")
    print(table(["measure", "n", "median ms", "max ms", "goal ms", "met"], rows))
    ratio_seen = med(dispatch["seen"]) / raw
    ratio_created = med(dispatch["created"]) / raw
    print(f"ratio Argus dispatch / raw submit_job (medians): {ratio_seen:.1f}x (seen), {ratio_created:.1f}x (created)")
    if handover["overlap"]:
        print(f"WARNING: {len(handover['overlap'])} whole-cluster jobs overlapped: {handover['overlap']}")
    bench.cleanup()
    return 0


def diagnose(cluster: Any) -> None:
    """What the tasks and Ray jobs were doing, for a run that went wrong."""
    from ray.job_submission import JobSubmissionClient

    from tasks.attempts import Attempt
    from tasks.models import Task

    for task in Task.objects.order_by("-id")[:5]:
        print(f"--- task {task.task_id}: {task.state} {task.pending_reason!r} {task.error_summary!r}", file=sys.stderr)
    try:
        for job in JobSubmissionClient(cluster.job_server_url).list_jobs()[-5:]:
            print(f"--- job {job.submission_id}: {job.status} {job.message!r}", file=sys.stderr)
        for attempt in Attempt.objects.order_by("-id")[:2]:
            logs = JobSubmissionClient(cluster.job_server_url).get_job_logs(attempt.ray_submission_id)
            print(f"--- log of {attempt.ray_submission_id}:\n{logs[-3000:]}", file=sys.stderr)
    except Exception as error:
        print(f"--- Ray: {error}", file=sys.stderr)


def finished_at_least(count: int) -> bool:
    from tasks.models import Task

    return Task.objects.filter(state__in=["SUCCEEDED", "FAILED"]).count() >= count


if __name__ == "__main__":
    sys.exit(main())
