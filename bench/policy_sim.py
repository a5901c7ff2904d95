"""Scheduling policies on a trace, through the scheduler's own admission code.

    .venv/bin/python bench/policy_sim.py --trace FILE.csv [--nodes 8] [--gpus 8]
                                         [--policies strict_fifo,best_effort_fifo,backfill,default]

The trace is a CSV with the header
``arrive_s,user,nnodes,gpus_per_node,run_s,time_limit_s,priority,preemptible`` (bench/trace_gen.py
makes one): a task arrives at ``arrive_s``, runs ``run_s`` seconds once started (or until its
time limit, where Argus stops it), and the schedulers know only ``time_limit_s`` (empty: none).

An event simulation: at each arrival, end and preemption stop, the queue is ordered by
tasks.scheduler.fairshare.order and admitted by tasks.scheduler.admission.decide, the very
functions the scheduler's tick calls (tasks/scheduler/launch.py), over ``--nodes`` worker nodes of
``--gpus`` GPUs. Admission is instantaneous and a started task runs exactly its run time: the
figures compare policies, not Ray's start-up costs.

Policies: ``strict_fifo``, ``best_effort_fifo`` and ``backfill`` (EASY backfill) with plain
priority + FIFO order and no preemption, and ``default``: what ships, read from the settings
(ARGUS_SCHEDULING_POLICY, fair share per ARGUS_FAIR_SHARE_WINDOW / _HALF_LIFE_H, preemption per
ARGUS_PREEMPTION / ARGUS_PREEMPT_GRACE_S, ARGUS_DEFAULT_TIME_LIMIT for tasks without a limit, and
the ARGUS_USER_MAX_RUNNING_* site limits). A preempted task goes back to the queue and later runs
only what it had left (it resumes from the checkpoint it saved in its grace period).

Prints one JSON object per policy per line: ``policy``, ``mean_wait_s``, ``p95_wait_s``,
``max_wait_s``, ``utilization`` (busy GPU-seconds over the cluster's GPU-seconds from the first
arrival to the last end) and more; ``default`` also gets its ratios to ``backfill``.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tasks.scheduler import admission, fairshare  # noqa: E402
from tasks.scheduler.rooms import Request, Room  # noqa: E402

PRIORITY = {"normal": 0, "high": 10}


@dataclass
class Task:
    key: int
    arrive: float
    user: str
    nnodes: int
    gpus_per_node: int
    run_s: float
    limit_s: float | None
    priority: int
    preemptible: bool
    left_s: float = 0.0  # run time still to go (after a preemption, less than run_s)
    queued_since: float = 0.0
    waited: float = 0.0
    started: float | None = None
    placement: dict[str, int] = field(default_factory=dict)
    ends_at: float = 0.0
    stopping_at: float | None = None
    attempt: int = 0


@dataclass(frozen=True)
class Config:
    policy: str
    scheduling: str
    fair_window_s: float = 0.0
    half_life_s: float = 0.0
    preemption: bool = False
    grace_s: float = 0.0
    default_limit_s: float | None = None
    caps: admission.Caps | None = None
    shortest_first: bool = False


def read_trace(path: Path) -> list[Task]:
    with path.open(newline="") as handle:
        return read_rows(csv.DictReader(handle))


REQUIRED = ("arrive_s", "user", "nnodes", "gpus_per_node", "run_s")


def read_rows(rows: Iterable[dict[str, str]]) -> list[Task]:
    """Tasks from CSV rows (header as above); ``time_limit_s`` empty or 0: none. A bad row is a
    SystemExit naming its line and field."""
    tasks = []
    for key, row in enumerate(rows):
        line = key + 2  # the header is line 1
        missing = [name for name in REQUIRED if not (row.get(name) or "").strip()]
        if missing:
            raise SystemExit(f"line {line}: {', '.join(missing)} missing")
        try:
            limit = (row.get("time_limit_s") or "").strip()
            task = Task(
                key=key,
                arrive=float(row["arrive_s"]),
                user=row["user"].strip(),
                nnodes=int(row["nnodes"]),
                gpus_per_node=int(row["gpus_per_node"]),
                run_s=float(row["run_s"]),
                limit_s=float(limit) if limit and float(limit) > 0 else None,
                priority=PRIORITY.get((row.get("priority") or "normal").strip().lower(), 0),
                preemptible=(row.get("preemptible") or "").strip().lower() in ("true", "1", "yes"),
            )
        except ValueError as error:
            raise SystemExit(f"line {line}: {error}") from None
        if task.nnodes < 1 or task.gpus_per_node < 1 or task.run_s < 0:
            raise SystemExit(f"line {line}: nnodes and gpus_per_node must be at least 1, run_s not negative")
        tasks.append(task)
    return tasks


def configs(names: list[str]) -> list[Config]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "argus_site.settings")
    os.environ.setdefault("ARGUS_SECRET_KEY", "argus-bench-secret-key")
    from django.conf import settings

    shipped = Config(
        policy="default",
        scheduling=settings.ARGUS_SCHEDULING_POLICY,
        shortest_first=settings.ARGUS_BACKFILL_SHORTEST_FIRST,
        fair_window_s=float(settings.ARGUS_FAIR_SHARE_WINDOW or 0),
        half_life_s=settings.ARGUS_FAIR_SHARE_HALF_LIFE_H * fairshare.HOUR,
        preemption=settings.ARGUS_PREEMPTION,
        grace_s=float(settings.ARGUS_PREEMPT_GRACE_S),
        default_limit_s=float(settings.ARGUS_DEFAULT_TIME_LIMIT) or None,
        caps=admission.Caps(settings.ARGUS_USER_MAX_RUNNING_GPUS, settings.ARGUS_USER_MAX_RUNNING_TASKS),
    )
    known = {name: Config(policy=name, scheduling=name) for name in admission.POLICIES}
    known["default"] = shipped
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown policies: {', '.join(unknown)} (known: {', '.join(known)})")
    return [known[name] for name in names]


class Simulation:
    def __init__(self, tasks: list[Task], nodes: int, gpus: int, config: Config) -> None:
        self.config = config
        self.tasks = [Task(**{**vars(t), "placement": {}}) for t in tasks]
        for task in self.tasks:
            task.left_s = task.run_s
            task.queued_since = task.arrive
        self.totals = {f"n{index}": Room(float(gpus), 0.0) for index in range(nodes)}
        self.events: list[tuple[float, int, str, int, int]] = []
        self.sequence = 0
        self.waiting: dict[int, Task] = {}
        self.running: dict[int, Task] = {}
        self.usage: dict[str, float] = {}
        self.usage_at = 0.0
        self.busy_gpu_s = 0.0
        self.clock = 0.0
        self.preemptions = 0
        self.unplaceable: list[int] = []
        for task in self.tasks:
            self._push(task.arrive, "arrive", task)

    def _push(self, at: float, kind: str, task: Task) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at, self.sequence, kind, task.key, task.attempt))

    def _advance(self, to: float) -> None:
        seconds = to - self.clock
        if seconds > 0:
            half_life = self.config.half_life_s
            self.usage = {user: fairshare.decayed(used, seconds, half_life) for user, used in self.usage.items()}
            for task in self.running.values():
                gpus = task.nnodes * task.gpus_per_node
                self.busy_gpu_s += gpus * seconds
                self.usage[task.user] = self.usage.get(task.user, 0.0) + gpus * seconds
        self.clock = to

    def _planned(self, task: Task) -> float | None:
        return task.limit_s if task.limit_s is not None else self.config.default_limit_s

    def run(self) -> dict[str, float | int | str]:
        first = min((t.arrive for t in self.tasks), default=0.0)
        self.clock = first
        while self.events:
            at = self.events[0][0]
            self._advance(at)
            while self.events and self.events[0][0] == at:
                _, _, kind, key, attempt = heapq.heappop(self.events)
                task = self.tasks[key]
                if attempt != task.attempt:
                    continue  # an end planned for an attempt that was preempted
                getattr(self, f"_on_{kind}")(task)
            self._schedule()
        return self._report(first)

    def _on_arrive(self, task: Task) -> None:
        if sum(1 for room in self.totals.values() if room.gpus >= task.gpus_per_node) < task.nnodes:
            self.unplaceable.append(task.key)  # larger than the cluster: it would wait for ever
            return
        self.waiting[task.key] = task

    def _on_end(self, task: Task) -> None:
        del self.running[task.key]
        task.attempt += 1  # a preemption stop planned for it is void now

    def _on_preempted(self, task: Task) -> None:
        """The victim's grace ended: it stops, saved, and waits again with what it has left."""
        del self.running[task.key]
        assert task.started is not None
        task.left_s -= self.clock - task.started
        task.stopping_at = None
        task.attempt += 1
        task.queued_since = self.clock
        self.waiting[task.key] = task

    def _free(self) -> dict[str, Room]:
        free = dict(self.totals)
        for task in self.running.values():
            for node, gpus in task.placement.items():
                free[node] = Room(free[node].gpus - gpus, 0.0)
        return free

    def _schedule(self) -> None:
        if not self.waiting:
            return
        config = self.config
        users = {t.user for t in self.waiting.values()} | {t.user for t in self.running.values()}
        factor = fairshare.factors(self.usage, {}, users) if config.fair_window_s else {}
        ordered = fairshare.order(
            [fairshare.Waiting(t.key, t.user, t.priority, t.arrive) for t in self.waiting.values()],
            factor,
            config.fair_window_s,
        )
        queue = []
        for item in ordered:
            task = self.tasks[item.key]
            queue.append(
                Request(task.key, task.nnodes, task.gpus_per_node, 0.0, task.user, self._planned(task), task.priority)
            )
        running = []
        for task in self.running.values():
            planned = self._planned(task)
            assert task.started is not None
            ends = (
                task.stopping_at
                if task.stopping_at is not None
                else (task.started + planned if planned is not None else None)
            )
            running.append(
                admission.Running(
                    task.key,
                    task.placement,
                    0.0,
                    ends,
                    task.user,
                    task.priority,
                    task.preemptible,
                    task.started,
                    stopping=task.stopping_at is not None,
                )
            )
        limited = config.caps is not None and (config.caps.max_gpus or config.caps.max_tasks)
        caps = {user: config.caps for user in users} if config.caps is not None and limited else None
        decision = admission.decide(
            queue,
            self._free(),
            self.totals,
            policy=config.scheduling,
            now=self.clock,
            running=running,
            caps=caps,
            preemption=config.preemption,
            shortest_first=config.shortest_first,
        )
        for request, placement in decision.admitted:
            task = self.waiting.pop(request.key)
            task.waited += self.clock - task.queued_since
            task.started = self.clock
            task.placement = placement
            # Argus stops a task at its time limit, which counts from each attempt's start.
            length = task.left_s if task.limit_s is None else min(task.left_s, task.limit_s)
            task.ends_at = self.clock + length
            self.running[task.key] = task
            self._push(task.ends_at, "end", task)
        for victim_key in decision.preempt:
            victim = self.running[victim_key]
            victim.stopping_at = min(victim.ends_at, self.clock + config.grace_s)
            if victim.stopping_at < victim.ends_at:
                self.preemptions += 1
                self._push(victim.stopping_at, "preempted", victim)

    def _report(self, first: float) -> dict[str, float | int | str]:
        done = [t for t in self.tasks if t.key not in self.unplaceable]
        waits = sorted(t.waited for t in done)
        last_end = max((t.ends_at for t in done), default=first)
        span = max(1e-9, last_end - first)
        capacity = sum(room.gpus for room in self.totals.values()) * span
        config = self.config
        result: dict[str, float | int | str] = {
            "policy": config.policy,
            "scheduling": config.scheduling,
            "fair_share_window_s": config.fair_window_s,
            "preemption": int(config.preemption),
            "tasks": len(done),
            "never_fit": len(self.unplaceable),
            "mean_wait_s": round(sum(waits) / len(waits), 1) if waits else 0.0,
            "p95_wait_s": round(percentile(waits, 95), 1) if waits else 0.0,
            "max_wait_s": round(waits[-1], 1) if waits else 0.0,
            "utilization": round(self.busy_gpu_s / capacity, 4),
            "makespan_s": round(span, 1),
            "preemptions": self.preemptions,
        }
        return result


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of a sorted, non-empty list."""
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(min(rank, len(ordered))) - 1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--policies", default="strict_fifo,best_effort_fifo,backfill,default")
    args = parser.parse_args(argv)
    if not args.trace.is_file():
        raise SystemExit(f"--trace {args.trace}: no such file")
    tasks = read_trace(args.trace)
    results = {}
    for config in configs([name.strip() for name in args.policies.split(",") if name.strip()]):
        result = Simulation(tasks, args.nodes, args.gpus, config).run()
        results[config.policy] = result
        if config.policy == "default" and "backfill" in results:
            easy = results["backfill"]
            for name in ("mean_wait_s", "max_wait_s"):
                base = float(easy[name])
                result[f"{name.removesuffix('_s')}_vs_backfill"] = round(float(result[name]) / base, 3) if base else 1.0
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
