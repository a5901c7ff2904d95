"""Policies over many generated traces: how the default compares with EASY backfill, trace by
trace (bench/policy_sim.py on one trace is one draw of a chaotic process: a small change in who
starts first moves every later wait).

    .venv/bin/python bench/policy_sweep.py [--seeds 1-30] [--load 1.3] [--users 8] [--sweep 50]
                                           [--tasks 400] [--nodes 8] [--gpus 8]
                                           [--high 0.1] [--preemptible 0.25]
                                           [--groups 3] [--quotas none,hard,borrow] [--jitter 60]

For each seed: bench/trace_gen.py's trace (its users dealt over ``--groups`` quota groups whose
nominal quotas sum to the cluster), then every policy through bench/policy_sim.py's Simulation,
the default once per ``--quotas`` mode (none: groups off; hard: borrow limit 0; borrow: the
quotas with borrowing and reclaim). Prints, per policy, the mean and worst over the traces of its
mean and longest wait divided by EASY backfill's on the same trace and its utilization against
EASY's, each worst with its seed, and how many traces miss issue 27 item 7's bound (mean wait at
most 0.85x EASY's, longest at most 1.1x, utilization not below EASY's); then the worst traces'
figures, and per quota mode the groups' figures (never started, borrowed share, quota waits,
wasted GPU-hours, the least-used group's quota).

The same traces with every arrival moved later by less than ``--jitter`` seconds (60; 0: none),
run through EASY backfill, give the row ``backfill, arrivals moved``: EASY against itself. A
policy's decisions differ from EASY's in a few places, and each difference moves every later wait
as such a minute does, so this row is the spread any policy other than EASY meets on a trace
before it does anything better or worse: the floor under a bound checked trace by trace.

Then preemption: the default (groups off) once more on each trace with preemption off, and a
table with and without it: preemptions and wasted GPU-hours per trace, the high tasks' mean and
p95 wait, the normal tasks' mean wait (means over the traces), and the per-trace ratios.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import policy_sim, trace_gen
from tasks.scheduler.quotas import GroupQuota


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


# Issue 27 item 7: on every trace, the default's mean wait at most this times EASY's, its
# longest wait at most that, and its utilization not below EASY's.
GOAL_MEAN = 0.85
GOAL_LONGEST = 1.1

Result = dict[str, float | int | str]
GroupRow = dict[str, float | int | str | None]


@dataclass
class Outcome:
    """One policy on one trace, against EASY backfill on the same trace."""

    seed: int
    mean: float  # mean wait / EASY's
    longest: float  # longest wait / EASY's
    utilization: float
    utilization_gain: float  # utilization - EASY's (points of 1)
    result: Result
    easy: Result

    def meets(self) -> bool:
        return self.mean <= GOAL_MEAN and self.longest <= GOAL_LONGEST and self.utilization_gain >= 0


def outcome(seed: int, result: Result, easy: Result) -> Outcome:
    return Outcome(
        seed,
        float(result["mean_wait_s"]) / float(easy["mean_wait_s"]),
        float(result["max_wait_s"]) / float(easy["max_wait_s"]),
        float(result["utilization"]),
        float(result["utilization"]) - float(easy["utilization"]),
        result,
        easy,
    )


def jitter(tasks: list[policy_sim.Task], seconds: float, seed: int) -> list[policy_sim.Task]:
    """``tasks`` with each arrival moved later by less than ``seconds`` (a stream of the seed's
    own), all else as it was."""
    rng = random.Random(f"{seed}-jitter")
    return [replace(task, arrive=task.arrive + rng.uniform(0.0, seconds)) for task in tasks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-30")
    parser.add_argument("--load", type=float, default=1.3)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--sweep", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=400)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--high", type=float, default=0.1, help="share of the tasks of high priority")
    parser.add_argument("--preemptible", type=float, default=0.25, help="share of the normal tasks preemptible")
    parser.add_argument("--groups", type=int, default=3, help="quota groups (bench/trace_gen.py; 0: none)")
    parser.add_argument(
        "--jitter", type=float, default=60.0, help="EASY once more, each arrival moved up to this many s later (0: not)"
    )
    parser.add_argument(
        "--quotas",
        default=",".join(policy_sim.QUOTA_MODES),
        help="the default policy under each of these (none: groups off; hard; borrow: with reclaim)",
    )
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.quotas.split(",") if mode.strip()] if args.groups else ["none"]
    unknown = [mode for mode in modes if mode not in policy_sim.QUOTA_MODES]
    if unknown:
        raise SystemExit(f"--quotas: unknown {', '.join(unknown)} (known: {', '.join(policy_sim.QUOTA_MODES)})")
    configs = policy_sim.configs(["strict_fifo", "best_effort_fifo", "backfill", "default"])
    shipped = configs[-1]
    quota_json = json.dumps(trace_gen.quotas(args.groups, args.nodes, args.gpus)) if args.groups else "{}"
    quotas = policy_sim.read_quotas(quota_json)
    runs = [(c.policy, c) for c in configs[:-1]]
    runs += [(f"default, groups {mode}", policy_sim.with_quotas(shipped, quotas, mode)) for mode in modes]
    jittered = f"backfill, arrivals moved < {args.jitter:g} s"
    outcomes: dict[str, list[Outcome]] = {label: [] for label, _ in runs}
    if args.jitter:
        outcomes[jittered] = []
    groups: dict[str, list[tuple[int, list[GroupRow], Result]]] = {mode: [] for mode in modes}
    preemption: dict[str, list[Result]] = {"on": [], "off": []}
    work_gpu_h = []
    for seed in seeds(args.seeds):
        rows = trace_gen.generate(
            seed,
            args.tasks,
            args.nodes,
            args.gpus,
            args.load,
            args.users,
            args.sweep,
            high=args.high,
            preemptible=args.preemptible,
            groups=args.groups,
        )
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=trace_gen.HEADER)
        writer.writeheader()
        writer.writerows(rows)
        tasks = policy_sim.read_rows(csv.DictReader(io.StringIO(text.getvalue())))
        results = {}
        for label, config in runs:
            simulation = policy_sim.Simulation(tasks, args.nodes, args.gpus, config)
            results[label] = simulation.run()
            if config.policy == "default":
                groups[config.quota_mode].append((seed, simulation.per_group(quotas), results[label]))
        if args.jitter:
            moved = policy_sim.Simulation(jitter(tasks, args.jitter, seed), args.nodes, args.gpus, configs[2])
            results[jittered] = moved.run()
        for label, result in results.items():
            outcomes[label].append(outcome(seed, result, results["backfill"]))
        preemption["on"].append(results[runs[3][0]])
        off = replace(runs[3][1], preemption=False)
        preemption["off"].append(policy_sim.Simulation(tasks, args.nodes, args.gpus, off).run())
        work_gpu_h.append(sum(t.gpus * t.run_s for t in tasks) / 3600)
    count = len(seeds(args.seeds))
    print(
        f"{count} traces: load {args.load}, {args.users} users, a sweep of {args.sweep}, {args.tasks} tasks, "
        f"{args.high:.0%} high, {args.preemptible:.0%} of normal preemptible, {args.groups} groups "
        f"(quotas {quota_json})"
    )
    print_against_easy(outcomes, count)
    print()
    if args.groups:
        print_groups(groups, modes, quotas)
        print()
    print_preemption(preemption, work_gpu_h, shipped.preemption)


def print_against_easy(outcomes: dict[str, list[Outcome]], count: int) -> None:
    """Each policy against EASY, trace by trace, with the worst trace of each measure (its seed)
    and how many traces miss issue 27 item 7's bound."""
    print(
        "| policy | mean wait / EASY: mean, worst (seed) | longest wait / EASY: mean, worst (seed) | "
        f"utilization: mean, worst minus EASY's (seed) | over {GOAL_MEAN}× / over {GOAL_LONGEST}× / "
        "below EASY's utilization | meets all three |"
    )
    print("|---|---|---|---|---|---|")
    for label, values in outcomes.items():
        mean = max(values, key=lambda o: o.mean)
        longest = max(values, key=lambda o: o.longest)
        used = min(values, key=lambda o: o.utilization_gain)
        print(
            f"| {label} | {statistics.mean(o.mean for o in values):.2f}, {mean.mean:.2f} ({mean.seed}) | "
            f"{statistics.mean(o.longest for o in values):.2f}, {longest.longest:.2f} ({longest.seed}) | "
            f"{statistics.mean(o.utilization for o in values):.3f}, {used.utilization_gain:+.3f} ({used.seed}) | "
            f"{sum(o.mean > GOAL_MEAN for o in values)} / {sum(o.longest > GOAL_LONGEST for o in values)} / "
            f"{sum(o.utilization_gain < 0 for o in values)} of {count} | {sum(o.meets() for o in values)} of {count} |"
        )
    print()
    print("Worst traces (mean wait, longest wait and utilization, the policy's against EASY's):")
    for label, values in outcomes.items():
        if label == "backfill":
            continue
        for measure, worst in (
            ("mean", max(values, key=lambda o: o.mean)),
            ("longest", max(values, key=lambda o: o.longest)),
            ("utilization", min(values, key=lambda o: o.utilization_gain)),
        ):
            r, e = worst.result, worst.easy
            mean_min = (float(r["mean_wait_s"]) / 60, float(e["mean_wait_s"]) / 60)
            longest_h = (float(r["max_wait_s"]) / 3600, float(e["max_wait_s"]) / 3600)
            print(
                f"  {label}, worst {measure}: seed {worst.seed}: mean {mean_min[0]:.0f} vs {mean_min[1]:.0f} min "
                f"({worst.mean:.2f}×), longest {longest_h[0]:.1f} vs {longest_h[1]:.1f} h ({worst.longest:.2f}×), "
                f"utilization {worst.utilization:.3f} vs {float(e['utilization']):.3f}"
            )


def oversized(result: Result, quotas: dict[str, GroupQuota]) -> bool:
    """Whether the task that waited longest needs more GPUs than its group's nominal quota: one
    that only borrowed GPUs can hold, idle in the other groups' quotas all at once."""
    quota = quotas.get(str(result["longest_waiter_group"]))
    return quota is not None and int(result["longest_waiter_gpus"]) > quota.nominal


def print_groups(
    groups: dict[str, list[tuple[int, list[GroupRow], Result]]], modes: list[str], quotas: dict[str, GroupQuota]
) -> None:
    """The default under each quota mode, per trace summed over its groups: never started, GPU-hours
    borrowed, the quota waits, reclaims and the work redone, the lowest use of a group's quota,
    the instants where passes never settled (a reclaim chosen and withdrawn in turn), and on how
    many traces the longest waiter needed more than its group's nominal quota."""

    def number(row: GroupRow, name: str) -> float:
        value = row[name]
        return float(value) if isinstance(value, int | float) else 0.0

    print(
        "| default, groups | never started / trace | borrowed share of GPU-h | tasks waiting in quota / trace | "
        "quota wait: mean (min), longest (h, seed) | reclaims / trace | wasted GPU-h / trace | "
        "least-used group's quota | unsettled instants / trace | longest waiter larger than its group's nominal |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode in modes:
        traces = [rows for _, rows, _ in groups[mode]]
        runs = [result for _, _, result in groups[mode]]
        borrowed = [sum(number(r, "gpu_h") * number(r, "borrowed_share") for r in t) for t in traces]
        used = [sum(number(r, "gpu_h") for r in t) for t in traces]
        waits = [sum(number(r, "quota_waits") for r in t) for t in traces]
        owed = [sum(number(r, "quota_wait_mean_s") * number(r, "quota_waits") for r in t) for t in traces]
        longest = [max((number(r, "quota_wait_max_s") for r in t), default=0.0) for t in traces]
        worst = max(range(len(traces)), key=lambda index: longest[index])
        lowest = [
            min((number(r, "utilization") for r in t if r["utilization"] is not None), default=0.0) for t in traces
        ]
        print(
            f"| {mode} | {statistics.mean(sum(number(r, 'never_started') for r in t) for t in traces):.1f} | "
            f"{sum(borrowed) / max(1e-9, sum(used)):.3f} | {statistics.mean(waits):.1f} | "
            f"{sum(owed) / max(1.0, sum(waits)) / 60:.0f}, {longest[worst] / 3600:.1f} ({groups[mode][worst][0]}) | "
            f"{statistics.mean(float(r['reclaims']) for r in runs):.1f} | "
            f"{statistics.mean(sum(number(r, 'wasted_gpu_h') for r in t) for t in traces):.1f} | "
            f"{statistics.mean(lowest):.2f} | {statistics.mean(float(r['unsettled']) for r in runs):.1f} | "
            f"{sum(oversized(result, quotas) for result in runs)} of {len(runs)} traces |"
        )


def print_preemption(runs: dict[str, list[Result]], work_gpu_h: list[float], shipped: bool) -> None:
    """The default with and without preemption, trace by trace."""
    if not shipped:
        print("The default has no preemption (ARGUS_PREEMPTION=false): nothing to compare.")
        return

    def average(side: str, name: str, scale: float = 1.0) -> float:
        return statistics.mean(float(r[name]) / scale for r in runs[side])

    print(f"default, preemption on / off ({statistics.mean(work_gpu_h):.0f} GPU-hours of work per trace)")
    print(
        "| preemption | preemptions / trace | wasted GPU-h / trace | high wait mean, p95 (min) | "
        "normal wait mean (min) | all tasks' mean wait (min) | utilization |"
    )
    print("|---|---|---|---|---|---|---|")
    for side in ("on", "off"):
        wasted = average(side, "wasted_gpu_h")
        share = 100 * wasted / statistics.mean(work_gpu_h)
        print(
            f"| {side} | {average(side, 'preemptions'):.1f} | {wasted:.2f} ({share:.2f} % of the work) | "
            f"{average(side, 'high_mean_wait_s', 60):.0f}, {average(side, 'high_p95_wait_s', 60):.0f} | "
            f"{average(side, 'normal_mean_wait_s', 60):.0f} | {average(side, 'mean_wait_s', 60):.0f} | "
            f"{average(side, 'utilization'):.3f} |"
        )
    for name in ("high_mean_wait_s", "high_p95_wait_s", "normal_mean_wait_s"):
        pairs = [policy_sim.ratio(on[name], off[name]) for on, off in zip(runs["on"], runs["off"], strict=True)]
        known = [value for value in pairs if value is not None]
        label = name.removesuffix("_s").replace("_", " ")
        if known:
            print(
                f"{label}, on / off per trace: mean {statistics.mean(known):.2f}, best {min(known):.2f}, "
                f"worst {max(known):.2f} ({len(known)} traces)"
            )


if __name__ == "__main__":
    main()
