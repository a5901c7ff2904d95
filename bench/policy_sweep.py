"""Policies over many generated traces: how the default compares with EASY backfill, trace by
trace (bench/policy_sim.py on one trace is one draw of a chaotic process: a small change in who
starts first moves every later wait).

    .venv/bin/python bench/policy_sweep.py [--seeds 1-30] [--load 1.3] [--users 8] [--sweep 50]
                                           [--tasks 400] [--nodes 8] [--gpus 8]

For each seed: bench/trace_gen.py's trace, then every policy through bench/policy_sim.py's
Simulation. Prints, per policy, the mean and worst over the traces of its mean and longest wait
divided by EASY backfill's on the same trace, its utilization, and how many traces miss the
issue's goals for the default (mean ≤ 1.1×, longest ≤ 1.2×).
"""

from __future__ import annotations

import argparse
import csv
import io
import statistics
import sys
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
    args = parser.parse_args()
    configs = policy_sim.configs(["strict_fifo", "best_effort_fifo", "backfill", "default"])
    ratios: dict[str, list[tuple[float, float, float]]] = {c.policy: [] for c in configs}
    for seed in seeds(args.seeds):
        rows = trace_gen.generate(seed, args.tasks, args.nodes, args.gpus, args.load, args.users, args.sweep)
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=trace_gen.HEADER)
        writer.writeheader()
        writer.writerows(rows)
        tasks = policy_sim.read_rows(csv.DictReader(io.StringIO(text.getvalue())))
        results = {c.policy: policy_sim.Simulation(tasks, args.nodes, args.gpus, c).run() for c in configs}
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
    print(f"{count} traces: load {args.load}, {args.users} users, a sweep of {args.sweep}, {args.tasks} tasks")
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


if __name__ == "__main__":
    main()
