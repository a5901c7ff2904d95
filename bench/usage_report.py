"""The usage report's time with 100,000 attempts in the ledger (issue 27 item 5: within 200 ms).

    .venv/bin/python bench/usage_report.py [--attempts 100000] [--repeat 20] [--keep]

Bulk-inserts --attempts ended attempts (5 per task, spread over 40 users in 5 groups and 8
users in none, ended over the last 365 days) with their ledger rows, as
tasks.usage.ledger.record writes them, into its own temp SQLite database; then times
GET /api/v2/usage in-process (Django's test client: routing, auth, the aggregate queries,
JSON or CSV) for an admin and a user, by user and by group, over 30 and 365 days: the median
and the worst of --repeat runs each.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import isolated_env, machine_note, make_user, migrate, ms, setup_django, table

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # at run time, only after setup_django()

GOAL_MS = 200.0
GROUPS = ["vision", "nlp", "speech", "robotics", "theory"]
PER_TASK = 5


def fill(attempts: int, users: dict[str, User]) -> float:
    """The ledger's rows and the attempts and tasks they name; returns the seconds it took."""
    from django.db import transaction
    from django.utils import timezone

    from accounts.groups.models import Membership
    from tasks.attempts import Attempt
    from tasks.choices import FailureKind, Quota
    from tasks.models import Task
    from tasks.usage.models import UsageRecord

    started = time.perf_counter()
    rng = random.Random(27)
    now = timezone.now()
    names = sorted(users)
    groups = dict(Membership.objects.values_list("user__username", "group__name"))
    for first in range(0, attempts // PER_TASK, 1000):
        count = min(1000, attempts // PER_TASK - first)
        with transaction.atomic():
            tasks = []
            for n in range(first, first + count):
                name = rng.choice(names)
                created = now - timedelta(days=365 * rng.random())
                tasks.append(
                    Task(
                        task_id=f"{name}-ppo-{created:%Y%m%d-%H%M%S}-u{n:06x}",
                        user=users[name],
                        workload="ppo",
                        state="SUCCEEDED",
                        nnodes=1,
                        n_gpus_per_node=4,
                        spec={},
                        created_at=created,
                        queued_at=created,
                        finished_at=created,
                    )
                )
            Task.objects.bulk_create(tasks)
            rows, records = [], []
            for task in tasks:
                start = task.created_at + timedelta(seconds=rng.uniform(0, 3600))
                for number in range(1, PER_TASK + 1):
                    seconds = rng.uniform(60, 7200)
                    failure = FailureKind.PREEMPTED if number < PER_TASK and rng.random() < 0.3 else ""
                    quota = Quota.BORROWED if rng.random() < 0.2 else Quota.IN_QUOTA
                    rows.append(
                        Attempt(
                            task=task,
                            attempt_no=number,
                            ray_submission_id=Attempt.submission_id_for(task.task_id, number),
                            gpus=4,
                            quota=quota,
                            failure_kind=failure,
                            start_time=start,
                            end_time=start + timedelta(seconds=seconds),
                        )
                    )
                    used = 4 * seconds
                    records.append(
                        (task, number, start + timedelta(seconds=seconds), used, quota, failure, start, number == 1)
                    )
                    start += timedelta(seconds=seconds + 60)
            Attempt.objects.bulk_create(rows)
            by_key = {(a.task_id, a.attempt_no): a.pk for a in rows}
            UsageRecord.objects.bulk_create(
                UsageRecord(
                    attempt_id=by_key[(task.pk, number)],
                    task_id=task.pk,
                    user_id=task.user_id,
                    group=groups.get(task.user.username, ""),
                    ended_at=ended,
                    gpu_seconds=used,
                    in_quota_gpu_seconds=0.0 if quota == Quota.BORROWED else used,
                    borrowed_gpu_seconds=used if quota == Quota.BORROWED else 0.0,
                    lost_gpu_seconds=used * 0.3 if failure else 0.0,
                    wait_s=(start - task.created_at).total_seconds() if first_start else None,
                )
                for task, number, ended, used, quota, failure, start, first_start in records
            )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (its database)")
    args = parser.parse_args()

    bench = isolated_env("usage", keep=args.keep)
    try:
        setup_django()
        migrate()
        from django.test import Client

        from accounts.groups.models import Membership, QuotaGroup
        from tasks.usage.models import UsageRecord

        print(f"bench dir {bench.dir}; {machine_note()}")
        users: dict[str, User] = {}
        tokens: dict[str, str] = {}
        for n in range(48):
            name = f"user{n:02d}"
            users[name], tokens[name] = make_user(name)
        _, tokens["admin"] = make_user("admin", admin=True)
        for index, group in enumerate(GROUPS):
            made = QuotaGroup.objects.create(name=group, nominal_gpus=8)
            Membership.objects.bulk_create(
                Membership(user=users[f"user{n:02d}"], group=made) for n in range(index * 8, index * 8 + 8)
            )
        took = fill(args.attempts, users)
        print(f"{UsageRecord.objects.count():,} ledger rows written in {took:.1f} s")

        rows = []
        for who in ("admin", "user00"):
            client = Client(headers={"Authorization": f"Bearer {tokens[who]}"})
            client.get("/api/v2/usage")  # not timed: the first request imports and warms up the views
            for by in ("user", "group"):
                for since in ("30d", "365d"):
                    for form in ("json", "csv"):
                        path = f"/api/v2/usage?by={by}&since={since}&format={form}"
                        times = []
                        for _ in range(args.repeat):
                            began = time.perf_counter()
                            response = client.get(path)
                            times.append(time.perf_counter() - began)
                            assert response.status_code == 200, response.content
                        rows.append(
                            [who, by, since, form, f"{ms(statistics.median(times)):.1f}", f"{ms(max(times)):.1f}"]
                        )
        print(table(["viewer", "by", "since", "format", "median ms", "worst ms"], rows))
        worst = max(float(row[5]) for row in rows)
        print(
            f"goal: within {GOAL_MS:.0f} ms; worst of all: {worst:.1f} ms ({'met' if worst <= GOAL_MS else 'NOT met'})"
        )
    finally:
        bench.cleanup()


if __name__ == "__main__":
    main()
