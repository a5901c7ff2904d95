"""Policies over many generated traces: how the default compares with EASY backfill, trace by
trace (bench/policy_sim.py on one trace is one draw of a chaotic process: a small change in who
starts first moves every later wait).

    .venv/bin/python bench/policy_sweep.py [--seeds 1-30] [--load 1.3] [--users 8] [--sweep 50]
                                           [--tasks 400] [--nodes 8] [--gpus 8]
                                           [--high 0.1] [--preemptible 0.25]

For each seed: bench/trace_gen.py's trace, then every policy through bench/policy_sim.py's
Simulation. Prints, per policy, the mean and worst over the traces of its mean and longest wait
divided by EASY backfill's on the same trace, its utilization, and how many traces miss the
issue's goals for the default (mean ≤ 1.1×, longest ≤ 1.2×).

Then preemption: the default once more on each trace with preemption off, and a second table,
with and without it: preemptions and wasted GPU-hours per trace, the high tasks' mean and p95
wait, the normal tasks' mean wait (means over the traces), and the per-trace ratios with / without.
"""

from __future__ import annotations

import argparse
import csv
import io
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import policy_sim, trace_gen


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


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
    args = parser.parse_args()
    configs = policy_sim.configs(["strict_fifo", "best_effort_fifo", "backfill", "default"])
    shipped = configs[-1]
    ratios: dict[str, list[tuple[float, float, float]]] = {c.policy: [] for c in configs}
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
        )
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=trace_gen.HEADER)
        writer.writeheader()
        writer.writerows(rows)
        tasks = policy_sim.read_rows(csv.DictReader(io.StringIO(text.getvalue())))
        results = {c.policy: policy_sim.Simulation(tasks, args.nodes, args.gpus, c).run() for c in configs}
        preemption["on"].append(results["default"])
        off = replace(shipped, preemption=False)
        preemption["off"].append(policy_sim.Simulation(tasks, args.nodes, args.gpus, off).run())
        work_gpu_h.append(sum(t.gpus * t.run_s for t in tasks) / 3600)
        easy = results["backfill"]
        for name, result in results.items():
            ratios[name].append(
                (
                    float(result["mean_wait_s"]) / float(easy["mean_wait_s"]),
                    float(result["max_wait_s"]) / float(easy["max_wait_s"]),
                    float(result["utilization"]),
                )
            )
    count = len(seeds(args.seeds))
    print(
        f"{count} traces: load {args.load}, {args.users} users, a sweep of {args.sweep}, {args.tasks} tasks, "
        f"{args.high:.0%} high, {args.preemptible:.0%} of normal preemptible"
    )
    print(
        "| policy | mean wait / EASY: mean, worst | longest wait / EASY: mean, worst | utilization | over 1.1× / 1.2× |"
    )
    print("|---|---|---|---|---|")
    for name, values in ratios.items():
        means, maxes, used = zip(*values, strict=True)
        print(
            f"| {name} | {statistics.mean(means):.2f}, {max(means):.2f} | {statistics.mean(maxes):.2f}, "
            f"{max(maxes):.2f} | {statistics.mean(used):.3f} | {sum(m > 1.1 for m in means)} / "
            f"{sum(m > 1.2 for m in maxes)} of {count} |"
        )

    print()
    print_preemption(preemption, work_gpu_h, shipped.preemption)


Result = dict[str, float | int | str]


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
