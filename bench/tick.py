"""One scheduler tick with a long queue and a simulated 100-node cluster.

    .venv/bin/python bench/tick.py [--lengths 100,1000,10000] [--nodes 100] [--steady 5] [--time-limits] [--groups]

Ray is replaced by the tests' fake (``RayJobs.connect`` patched): 100 worker nodes of 8 GPUs,
every GPU busy at first; what was submitted runs once its tick is over. Everything else is the
real tick (tasks.scheduler.tick.tick) on a real SQLite database of its own: sync, stop,
admission, the reasons written on waiting tasks, attempts and job files for the admitted ones.

For each policy (backfill, strict_fifo, best_effort_fifo) and each queue length, with the queue all QUEUED
(mixed shapes: 1x1, 1x4, 1x8, 2x8, 4x8 GPUs; a tenth of them high priority; with --pools F, that
fraction of them also has a second verl resource pool, a rollout pool of 1x1 or 1x2; with
--time-limits, every one a time limit of 1-5 h, which backfill plans with, the queue otherwise
the same; with --groups, the users in quota groups: alice and bob in vision, 40 % of the GPUs,
borrowing at most 10 %; carol in nlp, 40 %, lending at most 20 %; dave in none, the 20 % left):

1. first tick: nothing fits; every waiting task gets its reason, the ones that had their turn
   move QUEUED -> PENDING_RESOURCES (under best_effort_fifo, nearly all of them);
2. steady state, nothing admitted: --steady more ticks (default 10), median and worst;
3. some GPUs free up (4 nodes fully, 6 nodes with 2 GPUs): the tick that admits N tasks
   (each admission writes an attempt, two events, the job directory and submits);
4. steady state again, with those N followed on "Ray".

Each row gives the tick's wall time and its number of SQL queries (CaptureQueriesContext). Each
case also prints what was decided (the admitted tasks, where, and a digest of every task's state
and reason), to show that two versions decide alike.
Goal (issue 18): <= 50 ms per steady tick with 10,000 queued; queries independent of queue length.

The scheduler keeps its copy of the queue between ticks and reads only the tasks that changed
(tasks.queue.rows), with an overlap of OVERLAP_S: for that long after a change, its
rows are read again. A steady state is what the ticks after that see, so before each steady
phase the bench's clock (django.utils.timezone.now, which the scheduler and the database rows
both use) moves on by OVERLAP_S + 1 s. The "first tick" rows are a scheduler's first read of
the whole queue (as after a start, and every tasks.queue.rows.FULL_READ_S).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import PPO_SPEC, isolated_env, machine_note, make_user, migrate, ms, setup_django, table

GOAL_MS = 50.0
SHAPES = [((1, 1), 0.10), ((1, 4), 0.25), ((1, 8), 0.35), ((2, 8), 0.20), ((4, 8), 0.10)]


def busy_cluster(nodes: int, gpus: int = 8) -> Any:
    """The tests' fake Ray (devkit/fake_ray.py: the one fake, held to the scheduler's
    interface by mypy) with ``nodes`` workers of ``gpus`` GPUs, every GPU busy at first."""
    from devkit.fake_ray import FakeRay

    fake = FakeRay([gpus] * nodes)
    set_free(fake, {})
    return fake


def set_free(fake: Any, free: dict[int, float]) -> None:
    """Ray's count of free GPUs per worker (by index; the rest busy), CPUs following as verl's."""
    for index, node in enumerate(fake.nodes):
        gpus = free.get(index, 0.0)
        node.ray_gpus_free, node.ray_cpus_free = gpus, 3.0 * gpus + 2


def run_all(fake: Any) -> None:
    """Ray starts every submitted job: the steady phase follows N running attempts."""
    for submission_id in fake.submitted:
        if str(fake.known[submission_id].status) in ("PENDING", "JobStatus.PENDING"):
            fake.set_status(submission_id, "RUNNING", start_time=int(time.time() * 1000))


def reset() -> None:
    from django_q.models import OrmQ

    from tasks.attempts import Attempt
    from tasks.models import Event, Task, Usage
    from tasks.queue import rows as queue_rows

    queue_rows.forget()  # a new queue: the scheduler reads it whole, as a new scheduler does
    # No fair-share usage from the case before: its running tasks' usage, accrued in real time,
    # would order this queue (and decide what it admits) by how fast that case ran.
    Usage.objects.all().delete()
    Event.objects.all().delete()
    Attempt.objects.all().delete()
    Task.objects.all().delete()
    OrmQ.objects.all().delete()


def make_groups(users: list[Any], nodes: int) -> None:
    """--groups: the users in quota groups (see the module), so that admission runs by quota."""
    from accounts.groups.models import Membership, QuotaGroup

    gpus = nodes * 8
    vision = QuotaGroup.objects.create(name="vision", nominal_gpus=gpus * 4 // 10, borrow_limit_gpus=gpus // 10)
    nlp = QuotaGroup.objects.create(name="nlp", nominal_gpus=gpus * 4 // 10, lend_limit_gpus=gpus // 5)
    for user, group in zip(users, (vision, vision, nlp), strict=False):
        Membership.objects.create(user=user, group=group)


def fill_queue(length: int, users: list[Any], seed: int = 1, pools: float = 0.0, time_limits: bool = False) -> None:
    """``length`` QUEUED tasks, oldest first, as the API would have made them; a ``pools``
    fraction of them with a rollout pool besides the trainer's; with ``time_limits``, each with
    a time limit of 1-5 h (the queue otherwise the same: the limits come from a generator of
    their own)."""
    from django.utils import timezone

    from tasks.choices import PRIORITY_RANK, Priority
    from tasks.models import Task
    from tasks.specs.parse import parse_spec

    rng = random.Random(seed)
    # A generator of its own, so that the shapes and priorities are the ones drawn without.
    limits = random.Random(seed + 1)
    parsed = {user.username: parse_spec(PPO_SPEC, username=user.username) for user in users}
    shapes = [shape for shape, _ in SHAPES]
    weights = [weight for _, weight in SHAPES]
    start = timezone.now() - timedelta(hours=2)
    tasks = []
    for i in range(length):
        user = users[i % len(users)]
        nnodes, gpus = rng.choices(shapes, weights)[0]
        priority = Priority.HIGH if rng.random() < 0.1 else Priority.NORMAL
        # Drawn only with --pools: without, the queue is the one earlier figures were measured on.
        with_rollout = pools > 0 and rng.random() < pools
        rollout = [{"name": "rollout", "nnodes": 1, "n_gpus_per_node": rng.choice((1, 2))}] if with_rollout else []
        created = start + timedelta(milliseconds=i * 10)
        spec = parsed[user.username]
        time_limit_s = limits.randint(3600, 5 * 3600) if time_limits else None
        tasks.append(
            Task(
                task_id=f"{user.username}-ppo-{created:%Y%m%d-%H%M%S}-q{i:06x}",
                user=user,
                workload="ppo",
                kind="basic",
                state="QUEUED",
                nnodes=nnodes,
                n_gpus_per_node=gpus,
                extra_pools=rollout,
                priority=priority,
                priority_rank=PRIORITY_RANK[priority],
                time_limit_s=time_limit_s,
                spec_raw=spec.raw,
                spec={**spec.resolved.to_json(), "nnodes": nnodes, "n_gpus_per_node": gpus},
                warnings=[],
                created_at=created,
                queued_at=created,
                updated_at=created,
            )
        )
    Task.objects.bulk_create(tasks, batch_size=2000)


class MovingClock:
    """Real time plus an offset the bench moves on (see the module's docstring)."""

    def __init__(self) -> None:
        from django.utils import timezone

        self.real = timezone.now
        self.offset = timedelta()

    def now(self) -> Any:
        return self.real() + self.offset

    def settle(self) -> None:
        from tasks.queue.rows import OVERLAP_S

        self.offset += timedelta(seconds=OVERLAP_S + 1)


def timed_tick() -> tuple[tuple[float, float], int, Any]:
    """One tick: (wall seconds, CPU seconds of this process), its query count, its report. SQLite
    runs in this process, so the CPU time is the tick's whole cost, without the time spent waiting
    for a core on a loaded machine."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tasks.scheduler.tick import tick

    with CaptureQueriesContext(connection) as queries:
        started, cpu = time.perf_counter(), time.process_time()
        report = tick()
        seconds = (time.perf_counter() - started, time.process_time() - cpu)
    if not report.reachable:
        raise RuntimeError(f"the fake Ray was not used: {report.error}")
    return seconds, len(queries), report


def run_case(
    policy: str, length: int, users: list[Any], steady: int, nodes: int, pools: float, time_limits: bool
) -> list[list[object]]:
    from django.test import override_settings

    from tasks.models import Task

    reset()
    fill_queue(length, users, pools=pools, time_limits=time_limits)
    fake = busy_cluster(nodes)
    rows: list[list[object]] = []

    def row(phase: str, samples: list[tuple[float, float]], queries: list[int], admitted: int) -> None:
        times = [wall for wall, _ in samples]
        worst = max(times)
        rows.append(
            [
                policy,
                f"{length:,}",
                phase,
                len(times),
                ms(statistics.median(times)),
                ms(worst),
                ms(statistics.median(cpu for _, cpu in samples)),
                "/".join(str(q) for q in sorted(set(queries))),
                admitted,
                "yes" if ms(statistics.median(times)) <= GOAL_MS else "NO",
            ]
        )

    fake_ray = mock.patch("tasks.scheduler.rayjobs.RayJobs.connect", return_value=fake)
    clock = MovingClock()
    moving = mock.patch("django.utils.timezone.now", clock.now)
    with override_settings(ARGUS_SCHEDULING_POLICY=policy), fake_ray, moving:
        seconds, queries, report = timed_tick()
        row("first tick, nothing fits", [seconds], [queries], len(report.submitted))
        clock.settle()
        times, counts = [], []
        for _ in range(steady):
            seconds, queries, report = timed_tick()
            assert not report.submitted
            times.append(seconds)
            counts.append(queries)
        row("steady, nothing admitted", times, counts, 0)

        # GPUs free up: 4 whole nodes and 6 nodes with 2 GPUs each.
        set_free(fake, {**dict.fromkeys(range(4), 8.0), **dict.fromkeys(range(4, 10), 2.0)})
        seconds, queries, report = timed_tick()
        row("GPUs freed: tick admitting N", [seconds], [queries], len(report.submitted))
        # Ray now counts those GPUs as used by the jobs that got them.
        set_free(fake, {})
        run_all(fake)
        clock.settle()
        times, counts = [], []
        for _ in range(steady):
            seconds, queries, report = timed_tick()
            times.append(seconds)
            counts.append(queries)
        row("steady, N running, nothing admitted", times, counts, 0)
    waiting = Task.objects.filter(state__in=["QUEUED", "PENDING_RESOURCES"]).count()
    assert waiting == length - len(fake.submitted), (waiting, length, len(fake.submitted))
    print(f"  {policy} {length:,}: {decisions()}", flush=True)
    return rows


def decisions() -> str:
    """What the ticks decided, to compare two versions of the scheduler: the admitted tasks (by
    their place in the queue) with their nodes, and a digest of every task's state and reason."""
    from tasks.attempts import Attempt
    from tasks.models import Task

    admitted = [
        f"{task_id[-7:]}@{','.join(f'{node}:{gpus}' for node, gpus in sorted(placement.items()))}"
        for task_id, placement in Attempt.objects.order_by("pk").values_list("task__task_id", "placement")
    ]
    digest = hashlib.sha256()
    rows = Task.objects.order_by("task_id").values_list("task_id", "state", "pending__text")
    for task_id, state, reason in rows:
        digest.update(f"{task_id[-7:]} {state} {reason or ''}\n".encode())
    return f"admitted {' '.join(admitted) or 'none'}; states and reasons {digest.hexdigest()[:12]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="100,1000,10000", help="queue lengths (default 100,1000,10000)")
    parser.add_argument("--nodes", type=int, default=100, help="simulated worker nodes, 8 GPUs each (default 100)")
    parser.add_argument("--steady", type=int, default=10, help="steady-state ticks measured per phase (default 10)")
    parser.add_argument("--policies", default="backfill,strict_fifo,best_effort_fifo")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (database, job files)")
    parser.add_argument(
        "--pools", type=float, default=0.0, help="fraction of tasks with a rollout pool besides the trainer's (0)"
    )
    parser.add_argument(
        "--time-limits", action="store_true", help="every queued task gets a time limit of 1-5 h (seeded)"
    )
    parser.add_argument("--groups", action="store_true", help="the users in quota groups (see above)")
    args = parser.parse_args()

    bench = isolated_env("tick", keep=args.keep)
    os.environ["ARGUS_LOG_LEVEL"] = "WARNING"  # no log line per admission in the figures
    setup_django()
    migrate()
    users = [make_user(name)[0] for name in ("alice", "bob", "carol", "dave")]
    if args.groups:
        make_groups(users, args.nodes)
    from tasks.scheduler.loop import freeze_startup_objects

    freeze_startup_objects()  # as the scheduler's run() does once per process
    print(f"bench dir {bench.dir}; {machine_note()}", flush=True)
    rows: list[list[object]] = []
    for policy in args.policies.split(","):
        for length in (int(value) for value in args.lengths.split(",")):
            started = time.perf_counter()
            rows += run_case(policy, length, users, args.steady, args.nodes, args.pools, args.time_limits)
            print(f"  {policy} {length:,}: done in {time.perf_counter() - started:.1f} s", flush=True)

    with_pools = f", {args.pools:.0%} of the tasks with a rollout pool" if args.pools else ""
    with_pools += ", every queued task with a time limit of 1-5 h" if args.time_limits else ""
    with_pools += ", the users in quota groups" if args.groups else ""
    print(f"\n=== one tick, {args.nodes} simulated worker nodes x 8 GPUs, SQLite{with_pools} ===")
    print(machine_note())
    print(
        table(
            [
                "policy",
                "queued",
                "phase",
                "ticks",
                "median ms",
                "worst ms",
                "CPU ms",
                "queries",
                "admitted",
                f"<= {GOAL_MS:g}",
            ],
            rows,
        )
    )
    print(
        "median/worst ms: wall time of tick(); CPU ms: the median CPU time this process spent in it\n"
        "(SQLite included), which the machine's load disturbs far less; <= 50: the median wall time.\n"
        "queries: the distinct per-tick counts seen in that phase. 'admitted' ticks include N\n"
        "submissions (attempt rows, events, job files). The goal is for the 10,000 rows."
    )
    bench.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
