"""API intake and read latency through gunicorn (2 sync workers, SQLite).

    .venv/bin/python bench/api_intake.py [--threads 8] [--submissions 600] [--tasks 100000]
                                         [--requests 200] [--keep]

1. Intake: several client threads POST a valid basic PPO spec (YAML, Bearer token) to
   /api/v2/tasks as fast as gunicorn answers; tasks accepted (201) per second. Twice: with the
   scheduler idle (each new task enqueues a django-q tick run, as on a quiet system) and with a
   ticker holding the tick lease (a busy system: a new task only marks a tick request).
2. Reads with --tasks rows in the database (bulk-inserted, spread over four users, a realistic mix
   of states, one attempt per task that left the queue): list page, list with ?state=, detail,
   as a normal user and as an admin; p50/p95/p99 over --requests sequential requests each.
3. Where the time goes: each read again in-process (Django test client) with its SQL queries
   and their times, and SQLite's plan for the list queries.

Goals: >= 500 submissions/s (issue 26 item 9; 200 in issue 2), which on 2 cores means at most 4 ms of
server CPU per submission; p95 <= 50 ms for a list page, <= 20 ms for a detail (issue 2).
Everything runs against its own temp database and shared root; gunicorn is stopped by pid.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    PPO_SPEC,
    Gunicorn,
    cpu_seconds,
    isolated_env,
    machine_note,
    make_user,
    migrate,
    ms,
    post_spec,
    request,
    setup_django,
    summary,
    table,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # at run time, only after setup_django()

GOAL_RATE = 500.0
GOAL_LIST_P95_MS = 50.0
GOAL_DETAIL_P95_MS = 20.0

USERS = {"alice": 0.4, "bob": 0.3, "carol": 0.2, "dave": 0.1}  # shares of the bulk-inserted tasks
STATES = [  # (state, share) of the bulk-inserted tasks
    ("SUCCEEDED", 0.80),
    ("FAILED", 0.10),
    ("CANCELED", 0.04),
    ("QUEUED", 0.03),
    ("PENDING_RESOURCES", 0.015),
    ("RUNNING", 0.01),
    ("SUBMITTED", 0.005),
]


# --- intake ----------------------------------------------------------------------------------


def intake(base_url: str, tokens: list[str], threads: int, total: int, server_pids: list[int]) -> dict[str, float]:
    """``threads`` clients POST until ``total`` submissions were sent; returns the figures, with
    the CPU the gunicorn workers spent per accepted task (a figure the machine's load disturbs
    far less than the rate)."""
    lock = threading.Lock()
    sent = 0
    latencies: list[float] = []
    codes: dict[int, int] = {}
    errors: list[str] = []

    def client(token: str) -> None:
        nonlocal sent
        while True:
            with lock:
                if sent >= total:
                    return
                sent += 1
            code, body, seconds = post_spec(base_url, token, PPO_SPEC)
            with lock:
                latencies.append(seconds)
                codes[code] = codes.get(code, 0) + 1
                if code != 201 and len(errors) < 3:
                    errors.append(f"{code}: {str(body)[:300]}")

    workers = [threading.Thread(target=client, args=(tokens[i % len(tokens)],)) for i in range(threads)]
    cpu_before = cpu_seconds(server_pids)
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - started
    server_cpu = cpu_seconds(server_pids) - cpu_before
    for error in errors:
        print(f"  refused: {error}")
    accepted = codes.get(201, 0)
    figures = summary(latencies)
    return {
        "sent": len(latencies),
        "accepted": accepted,
        "wall_s": wall,
        "rate": accepted / wall,
        "p50_ms": ms(figures["p50"]),
        "p95_ms": ms(figures["p95"]),
        "p99_ms": ms(figures["p99"]),
        "cpu_ms": ms(server_cpu / max(1, accepted)),
        "cpu_share": server_cpu / wall,
    }


def hold_tick_lease(held: bool) -> None:
    """Pretend a ticker is running (the lease held far into the future), or let it go."""
    from django.utils import timezone

    from tasks.lease import tick_lease

    if held:
        tick_lease().update(holder="bench:busy-ticker", expires_at=timezone.now() + timedelta(hours=1))
    else:
        tick_lease().update(holder="", expires_at=None)


# --- 100,000 tasks ---------------------------------------------------------------------------


def fill(total: int, users: dict[str, User], batch: int = 5000) -> float:
    """Bulk-insert tasks (and one attempt for each that left the queue) up to ``total`` rows."""
    from django.db import transaction
    from django.utils import timezone

    from tasks.attempts import Attempt
    from tasks.models import Task
    from tasks.specs.parse import parse_spec

    started = time.perf_counter()
    missing = total - Task.objects.count()
    rng = random.Random(42)
    parsed = {name: parse_spec(PPO_SPEC, username=name) for name in USERS}
    names = list(USERS)
    weights = list(USERS.values())
    state_names = [s for s, _ in STATES]
    state_weights = [w for _, w in STATES]
    now = timezone.now()
    span = timedelta(days=120).total_seconds()
    made = 0
    while made < missing:
        count = min(batch, missing - made)
        tasks = []
        for i in range(count):
            name = rng.choices(names, weights)[0]
            state = rng.choices(state_names, state_weights)[0]
            # Newest last, as if submitted over the last 120 days (the intake's tasks are newer).
            created = now - timedelta(seconds=span * (1 - (made + i) / missing) + 3600)
            spec = parsed[name]
            terminal = state in ("SUCCEEDED", "FAILED", "CANCELED")
            tasks.append(
                Task(
                    task_id=f"{name}-ppo-{created:%Y%m%d-%H%M%S}-b{made + i:06x}",
                    user=users[name],
                    workload="ppo",
                    kind="basic",
                    state=state,
                    nnodes=1,
                    n_gpus_per_node=4,
                    priority="normal",
                    priority_rank=0,
                    spec_raw=spec.raw,
                    spec=spec.resolved.to_json(),
                    warnings=[],
                    error_summary="Attempt 1 failed (RUNTIME_ERROR): boom. See the log." if state == "FAILED" else "",
                    created_at=created,
                    queued_at=created,
                    updated_at=created + timedelta(minutes=30),
                    finished_at=created + timedelta(minutes=30) if terminal else None,
                )
            )
        with transaction.atomic():
            Task.objects.bulk_create(tasks, batch_size=1000)
            attempts = [
                Attempt(
                    task_id=task.pk,
                    attempt_no=1,
                    ray_submission_id=f"{task.task_id}--a01",
                    ray_status={"SUCCEEDED": "SUCCEEDED", "FAILED": "FAILED", "CANCELED": "STOPPED"}.get(
                        task.state, "RUNNING"
                    ),
                    gpus=4,
                    placement={"node-a": 4},
                    log_path=f"/shared/users/x/jobs/{task.task_id}--a01/driver.log",
                    created_at=task.created_at,
                    submitted_at=task.created_at,
                    start_time=task.created_at,
                    end_time=task.finished_at,
                )
                for task in tasks
                if task.state not in ("QUEUED", "PENDING_RESOURCES")
            ]
            Attempt.objects.bulk_create(attempts, batch_size=1000)
        made += count
    return time.perf_counter() - started


# --- reads -----------------------------------------------------------------------------------


def read_scenarios(users: dict[str, User]) -> tuple[list[tuple[str, str, str, str]], dict[str, object]]:
    """(label, kind, token name, path) for each read measured, and the task ids to pick from."""
    from tasks.models import Task

    rng = random.Random(7)
    mine = list(Task.objects.filter(user=users["alice"]).values_list("task_id", flat=True)[:5000])
    anyone = list(Task.objects.values_list("task_id", flat=True)[:20000])
    return [
        ("list, user (alice)", "list", "alice", "/api/v2/tasks"),
        ("list, admin", "list", "admin", "/api/v2/tasks"),
        ("list, user, ?state=RUNNING", "list", "alice", "/api/v2/tasks?state=RUNNING"),
        (
            "list, user, ?state=QUEUED&state=PENDING_RESOURCES",
            "list",
            "alice",
            "/api/v2/tasks?state=QUEUED&state=PENDING_RESOURCES",
        ),
        ("list, admin, ?state=FAILED", "list", "admin", "/api/v2/tasks?state=FAILED"),
        ("list, admin, ?state=RUNNING", "list", "admin", "/api/v2/tasks?state=RUNNING"),
        ("list, user, page 20", "list", "alice", "/api/v2/tasks?page=20"),
        ("detail, user (own task)", "detail", "alice", "/api/v2/tasks/{alice}"),
        ("detail, admin (any task)", "detail", "admin", "/api/v2/tasks/{any}"),
    ], {"alice": mine, "any": anyone, "rng": rng}


def measure_reads(base_url: str, tokens: dict[str, str], scenarios, pools, n: int) -> list[list[object]]:
    rows = []
    rng = pools["rng"]
    for label, kind, who, path in scenarios:
        latencies = []
        for i in range(n + 10):
            url = base_url + path.format(alice=rng.choice(pools["alice"]), any=rng.choice(pools["any"]))
            code, _, seconds = request("GET", url, tokens[who])
            if code != 200:
                raise RuntimeError(f"GET {url} answered {code}")
            if i >= 10:  # the first ones warm the workers' caches
                latencies.append(seconds)
        figures = summary(latencies)
        goal = GOAL_LIST_P95_MS if kind == "list" else GOAL_DETAIL_P95_MS
        p95 = ms(figures["p95"])
        rows.append(
            [label, len(latencies), ms(figures["p50"]), p95, ms(figures["p99"]), goal, "yes" if p95 <= goal else "NO"]
        )
    return rows


def profile_reads(tokens: dict[str, str], scenarios, pools) -> None:
    """Each read in-process, with its queries: which statements cost what."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    rng = pools["rng"]
    print("\nWhere the time goes (in-process, Django test client; 3rd run of each, queries in ms):")
    for label, _, who, path in scenarios:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {tokens[who]}")
        for _ in range(3):
            url = path.format(alice=rng.choice(pools["alice"]), any=rng.choice(pools["any"]))
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                total = time.perf_counter() - started
        assert response.status_code == 200, response.content[:300]
        sql_ms = sum(float(q["time"]) for q in queries.captured_queries) * 1000
        print(f"\n  {label}: {ms(total):.1f} ms in all, {len(queries)} queries, {sql_ms:.1f} ms in SQL")
        for q in queries.captured_queries:
            print(f"    {float(q['time']) * 1000:7.1f} ms  {q['sql'][:150]}")


def explain_lists(users: dict[str, User]) -> None:
    from django.db import connection

    from tasks.models import Task

    print("\nSQLite's plans for the list queries (alice's page 1, and admin ?state=RUNNING):")
    for label, queryset in (
        ("user page", Task.objects.filter(user=users["alice"]).order_by("-created_at", "-id")[:50]),
        ("user count", Task.objects.filter(user=users["alice"])),
        ("admin state page", Task.objects.filter(state__in=["RUNNING"]).order_by("-created_at", "-id")[:50]),
        ("admin state count", Task.objects.filter(state__in=["RUNNING"])),
        (
            "user state page",
            Task.objects.filter(user=users["alice"], state__in=["RUNNING"]).order_by("-created_at", "-id")[:50],
        ),
    ):
        sql, params = (queryset.values("id") if "count" in label else queryset).query.sql_with_params()
        if "count" in label:
            sql = f"SELECT COUNT(*) FROM ({sql})"
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = "; ".join(row[-1] for row in cursor.fetchall())
        print(f"  {label:18} {plan}")


# --- main ------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=8, help="concurrent POSTing clients (default 8)")
    parser.add_argument("--submissions", type=int, default=600, help="POSTs per intake run (default 600)")
    parser.add_argument("--rounds", type=int, default=2, help="intake rounds (default 2)")
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks in the database for the reads")
    parser.add_argument("--requests", type=int, default=200, help="requests per read scenario (default 200)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument(
        "--server-threads", type=int, default=1, help="threads per gunicorn worker (default 1: sync workers)"
    )
    parser.add_argument("--no-profile", action="store_true", help="skip the in-process query profile")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (database, gunicorn log)")
    args = parser.parse_args()

    warnings.filterwarnings("ignore", message="No directory at")
    bench = isolated_env("intake", keep=args.keep)
    setup_django()
    migrate()
    print(f"bench dir {bench.dir}; {machine_note()}")
    users: dict[str, User] = {}
    tokens: dict[str, str] = {}
    for name in [*USERS, "admin"]:
        users[name], tokens[name] = make_user(name, admin=name == "admin")
    server = None
    try:
        server = Gunicorn(
            bench.env(), workers=args.workers, log=bench.dir / "gunicorn.log", threads=args.server_threads
        )
        user_tokens = [tokens[name] for name in USERS]
        pids = server.worker_pids()
        intake(server.url, user_tokens, args.threads, 40, pids)  # warm-up: imports, first connections
        intake_rows = []
        for round_no in range(1, args.rounds + 1):
            for label, held in (
                ("scheduler idle (each POST enqueues a tick run)", False),
                ("ticker running (lease held: a POST marks a request)", True),
            ):
                hold_tick_lease(held)
                load1 = os.getloadavg()[0]
                figures = intake(server.url, user_tokens, args.threads, args.submissions, pids)
                intake_rows.append(
                    [
                        f"{round_no}: {label}",
                        figures["accepted"],
                        figures["wall_s"],
                        figures["rate"],
                        figures["p50_ms"],
                        figures["p95_ms"],
                        figures["p99_ms"],
                        figures["cpu_ms"],
                        (os.cpu_count() or 1) * 1000 / figures["cpu_ms"],
                        figures["cpu_share"],
                        "yes" if figures["rate"] >= GOAL_RATE else "NO",
                        f"{load1:.1f}",
                    ]
                )
        hold_tick_lease(False)

        print(f"\nfilling the database to {args.tasks:,} tasks...", flush=True)
        seconds = fill(args.tasks, users)
        from tasks.attempts import Attempt
        from tasks.models import Task

        print(f"  {Task.objects.count():,} tasks, {Attempt.objects.count():,} attempts in {seconds:.1f} s")
        scenarios, pools = read_scenarios(users)
        load_before = machine_note()
        read_rows = measure_reads(server.url, tokens, scenarios, pools, args.requests)
        load_after = machine_note()
    finally:
        if server is not None:
            server.stop()

    if not args.no_profile:
        profile_reads(tokens, scenarios, pools)
        explain_lists(users)

    threads = f" --threads {args.server_threads}" if args.server_threads > 1 else ""
    print(f"\n=== API intake: gunicorn -w {args.workers}{threads}, SQLite, {args.threads} client threads ===")
    print(machine_note())
    print(
        table(
            [
                "round: intake",
                "accepted",
                "wall s",
                "tasks/s",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "srv CPU ms/task",
                "CPU-bound max/s",
                "srv cores",
                f">= {GOAL_RATE:.0f}/s",
                "load1",
            ],
            intake_rows,
        )
    )
    print(
        "srv CPU ms/task: CPU the gunicorn workers spent per accepted task; CPU-bound max/s: what that\n"
        "allows with every core of this machine given to gunicorn (cores x 1000 / CPU ms), an upper\n"
        "bound; srv cores: how many cores the workers got on average during the run."
    )
    print(f"\n=== reads with {args.tasks:,} tasks (sequential, one client) ===")
    print(f"before: {load_before}\nafter:  {load_after}")
    print(table(["read", "n", "p50 ms", "p95 ms", "p99 ms", "goal p95", "met"], read_rows))
    bench.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
