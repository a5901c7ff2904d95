"""The disk-usage scan (accounts.diskusage.scan.measure_all) over a tree of 100,000 files.

    .venv/bin/python bench/disk_scan.py [--files 100000] [--users 10] [--runs 5] [--seed 1]

Builds, in the bench's own shared root and database: --users users, each with a home of
files / users files spread as a lab's are (jobs/<task>/checkpoints/global_step_N/ shards, a
driver.log and metrics.jsonl per attempt, datasets/ parquet parts, code/), 0 to 8 KiB each, plus
a symlink loop and a link to a large file outside every home (neither may be counted or
followed). Then times measure_all() --runs times (the page cache warm after the first), and
checks each user's stored total against the bytes written.

Goal (issue 28): a scan of 100,000 files well within ARGUS_DISK_SCAN_BUDGET_S (60 s), so that
one run of the periodic job measures every home; it runs in a django-q2 worker of its own, never
in the tick.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, isolated_env, machine_note, make_user, migrate, ms, percentile, setup_django, table


def build_home(home: Path, files: int, rng: random.Random) -> int:
    """Write ``files`` files under ``home``; returns their bytes."""
    written = 0
    for i in range(files):
        kind = rng.random()
        if kind < 0.6:  # checkpoint shards: the bulk of a lab's files
            task, step = i // 400, (i // 40) % 10
            path = home / "jobs" / f"t-{task}" / "checkpoints" / f"global_step_{step}" / "actor" / f"shard_{i}.pt"
        elif kind < 0.75:
            # An attempt's job root, each its own folder.
            path = home / "jobs" / f"t-{i // 400}-{i}" / ("driver.log" if i % 2 else "metrics.jsonl")
        elif kind < 0.95:
            path = home / "datasets" / f"set-{i // 500}" / f"part-{i}.parquet"
        else:
            path = home / "code" / f"mod_{i // 50}" / f"file_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        size = rng.randint(0, 8192)
        path.write_bytes(b"x" * size)  # every path above is its own: i is in each
        written += size
    return written


SCAN_FOREVER = "from accounts.diskusage.scan import measure_all\nwhile True:\n    measure_all()\n"


def tick_times(users: list[Any], ticks: int, env: dict[str, str], queue: int) -> dict[str, list[float]]:
    """Steady ticks (bench/tick.py's: the fake Ray's 10 busy nodes, ``queue`` tasks waiting) alone,
    then while another process runs measure_all back to back (as the django-q2 worker would,
    but without its 5 minutes' rest): each tick's wall seconds."""
    from unittest import mock

    from accounts.diskusage.models import DiskUsage
    from bench.tick import MovingClock, busy_cluster, fill_queue, timed_tick

    fill_queue(queue, users)
    fake_ray = mock.patch("tasks.scheduler.rayjobs.RayJobs.connect", return_value=busy_cluster(10))
    clock = MovingClock()
    found: dict[str, list[float]] = {}
    with fake_ray, mock.patch("django.utils.timezone.now", clock.now):
        timed_tick()  # the first tick reads the whole queue
        clock.settle()
        found["alone"] = [timed_tick()[0][0] for _ in range(ticks)]
        before = datetime.now(UTC)
        scanner = subprocess.Popen([sys.executable, "manage.py", "shell", "-c", SCAN_FOREVER], cwd=ROOT, env=env)
        try:
            time.sleep(1.0)  # past Django's start: scanning
            found["while scanning"] = [timed_tick()[0][0] for _ in range(ticks)]
            assert scanner.poll() is None, "the scanner stopped"
            assert DiskUsage.objects.filter(measured_at__gt=before).exists(), "the scanner measured nothing"
        finally:
            scanner.terminate()  # the one process this started
            scanner.wait(30)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ticks", type=int, default=30, help="steady ticks timed alone and while scanning")
    parser.add_argument("--queue", type=int, default=1000, help="tasks waiting in those ticks")
    args = parser.parse_args()

    bench = isolated_env("disk-scan")
    setup_django()
    migrate()
    from accounts.diskusage.models import DiskUsage
    from accounts.diskusage.scan import measure_all
    from accounts.homes import home_dir

    try:
        rng = random.Random(args.seed)
        outside = bench.shared_root / "outside.bin"
        outside.write_bytes(b"y" * (1 << 20))
        expected: dict[str, int] = {}
        users = []
        started = time.perf_counter()
        for n in range(args.users):
            user, _ = make_user(f"user{n}")
            users.append(user)
            home = home_dir(user.username)
            expected[user.username] = build_home(home, args.files // args.users, rng)
            (home / "loop").symlink_to(home, target_is_directory=True)
            (home / "big-link").symlink_to(outside)
            expected[user.username] += sum(os.lstat(home / name).st_size for name in ("loop", "big-link"))
        built_s = time.perf_counter() - started
        users_root = bench.shared_root / "users"
        on_disk = sum(1 for path in users_root.rglob("*") if path.is_file() and not path.is_symlink())
        print(f"{machine_note()}\nbuilt {on_disk} files (+ 2 links per home) for {args.users} users in {built_s:.1f} s")

        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            measured = measure_all()
            times.append(time.perf_counter() - started)
            assert measured == args.users, measured
        stored = dict(DiskUsage.objects.values_list("user__username", "used_bytes"))
        assert stored == expected, "the stored totals differ from the bytes written"
        print(
            table(
                ["files", "users", "runs", "first s", "median s", "worst s", "files/s (median)"],
                [
                    [
                        on_disk,
                        args.users,
                        args.runs,
                        times[0],
                        statistics.median(times),
                        max(times),
                        round(on_disk / statistics.median(times)),
                    ]
                ],
            )
        )
        print(f"totals checked: {sum(stored.values())} bytes over {len(stored)} users, as written")

        ticks = tick_times(users, args.ticks, bench.env(), args.queue)
        print(
            table(
                ["ticks", "n", "median ms", "p90 ms", "worst ms"],
                [
                    [name, len(times), ms(statistics.median(times)), ms(percentile(times, 90)), ms(max(times))]
                    for name, times in ticks.items()
                ],
            )
        )
    finally:
        bench.cleanup()


if __name__ == "__main__":
    main()
