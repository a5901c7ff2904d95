"""A synthetic lab trace for bench/policy_sim.py: a contended GPU cluster shared by a handful of
researchers, one of whom submits a sweep.

    .venv/bin/python bench/trace_gen.py --seed 1 [--tasks 400] [--nodes 8] [--gpus 8]
                                        [--load 1.3] [--users 8] [--sweep 50]
                                        [--high 0.1] [--preemptible 0.25]
                                        [--groups 3] [--quotas-out quotas.json] > trace.csv

What it draws, and why:

* **Shapes** as a lab's verl runs come: mostly one node (1, 2, 4 or 8 GPUs: debugging, SFT,
  small GRPO), some whole-node and multi-node runs (2-4 nodes of ``--gpus``), never more than
  half the cluster. Large gangs are what FIFO blocks on and best-effort FIFO starves.
* **Run times** log-normal, median 1 h, from 5 min to 24 h: a few long runs hold GPUs while
  many short ones come and go.
* **Time limits** as users set them: 1.1 to 3 times the real run time, rounded up to 15 min.
  Schedulers see only the limit.
* **Arrivals** Poisson, at a rate that offers ``--load`` times what the cluster can run (GPU-
  seconds per second): demand exceeds supply and a queue builds. One user also submits a sweep
  of ``--sweep`` identical tasks at one moment, a third of the way in.
* **Priority** ``high`` for a share ``--high`` of the tasks (1 in 10); **preemptible** for a
  share ``--preemptible`` of the normal ones (1 in 4). The sweep is normal and not preemptible.
* **Checkpoints** every 5, 10, 20 or 30 minutes of work (``checkpoint_s``; verl's ``save_freq``
  as a lab sets it), drawn from a stream of their own so that the other columns stay those that
  the same seed gave before the column existed.
* **Groups** (``--groups``, 0: none): the users dealt at random over a lab's teams (vision, nlp,
  rl, ...), so that each holds some of the heavy users and some of the light ones, from a
  stream of their own too (the other columns stay the same). Their quotas (``quotas``;
  ``--quotas-out`` writes them as bench/policy_sim.py's ``--groups`` reads them) are whole nodes
  dealt as evenly as the cluster allows and sum to it, with no borrow or lend limit: as a lab
  splits the nodes its teams paid for.

The same seed gives the same trace.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import sys
from pathlib import Path

HEADER = [
    "arrive_s",
    "user",
    "nnodes",
    "gpus_per_node",
    "run_s",
    "time_limit_s",
    "priority",
    "preemptible",
    "checkpoint_s",
    "group",
]
CHECKPOINTS_S = (300, 600, 1200, 1800)
GROUP_NAMES = ("vision", "nlp", "rl", "speech", "robotics", "theory")


def group_names(count: int) -> list[str]:
    if not 0 <= count <= len(GROUP_NAMES):
        raise SystemExit(f"--groups {count}: 0 to {len(GROUP_NAMES)}")
    return list(GROUP_NAMES[:count])


def membership(seed: int, users: list[str], groups: int) -> dict[str, str]:
    """Each user's group ("" for all when ``groups`` is 0): the users shuffled, then dealt."""
    names = group_names(groups)
    if not names:
        return dict.fromkeys(users, "")
    dealt = list(users)
    random.Random(f"{seed}-groups").shuffle(dealt)
    return {user: names[index % len(names)] for index, user in enumerate(dealt)}


def quotas(groups: int, nodes: int, gpus: int) -> dict[str, dict[str, int | None]]:
    """The groups' quotas: whole nodes, as evenly as they go, summing to the cluster; no borrow
    or lend limit (bench/policy_sim.py's ``--groups`` format)."""
    names = group_names(groups)
    return {
        name: {
            "nominal": (nodes // len(names) + (index < nodes % len(names))) * gpus,
            "borrow_limit": None,
            "lend_limit": None,
        }
        for index, name in enumerate(names)
    }


def shape(rng: random.Random, nodes: int, gpus: int) -> tuple[int, int]:
    roll = rng.random()
    if roll < 0.70:
        return 1, rng.choice([g for g in (1, 2, 4, gpus) if g <= gpus])
    if roll < 0.85:
        return 1, gpus
    return rng.randint(2, max(2, nodes // 2)), gpus


def run_time(rng: random.Random) -> int:
    return int(min(24 * 3600, max(300, rng.lognormvariate(math.log(3600), 1.0))))


def time_limit(rng: random.Random, run_s: int) -> int:
    quarter = 900
    return int(math.ceil(run_s * rng.uniform(1.1, 3.0) / quarter) * quarter)


Row = dict[str, int | str]


def generate(
    seed: int,
    tasks: int,
    nodes: int,
    gpus: int,
    load: float,
    users: int,
    sweep: int,
    *,
    high: float = 0.1,
    preemptible: float = 0.25,
    groups: int = 3,
) -> list[Row]:
    rng = random.Random(seed)
    saves = random.Random(f"{seed}-checkpoints")
    names = [f"user{n}" for n in range(users)]
    group_of = membership(seed, names, groups)
    # Some users submit more than others (a lab is never even).
    activity = [rng.uniform(0.3, 1.0) for _ in names]
    drawn = []
    for _ in range(tasks - sweep):
        nnodes, per_node = shape(rng, nodes, gpus)
        drawn.append((nnodes, per_node, run_time(rng)))
    # The arrival rate that offers `load` times the cluster's GPU-seconds per second.
    mean_work = sum(n * g * r for n, g, r in drawn) / len(drawn)
    rate = load * nodes * gpus / mean_work
    rows: list[Row] = []
    clock = 0.0
    for nnodes, per_node, run_s in drawn:
        clock += rng.expovariate(rate)
        is_high = rng.random() < high
        rows.append(
            {
                "arrive_s": int(clock),
                "user": rng.choices(names, weights=activity)[0],
                "nnodes": nnodes,
                "gpus_per_node": per_node,
                "run_s": run_s,
                "time_limit_s": time_limit(rng, run_s),
                "priority": "high" if is_high else "normal",
                "preemptible": "false" if is_high else str(rng.random() < preemptible).lower(),
                "checkpoint_s": saves.choice(CHECKPOINTS_S),
            }
        )
    if sweep:
        at = int(rows[len(rows) // 3]["arrive_s"])
        sweeper = names[0]
        per_node = min(gpus, 2)
        for _ in range(sweep):
            run_s = int(rng.uniform(0.5, 2.0) * 3600)
            rows.append(
                {
                    "arrive_s": at,
                    "user": sweeper,
                    "nnodes": 1,
                    "gpus_per_node": per_node,
                    "run_s": run_s,
                    "time_limit_s": time_limit(rng, run_s),
                    "priority": "normal",
                    "preemptible": "false",
                    "checkpoint_s": saves.choice(CHECKPOINTS_S),
                }
            )
    for row in rows:
        row["group"] = group_of[str(row["user"])]
    rows.sort(key=lambda row: int(row["arrive_s"]))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=400)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--load", type=float, default=1.3, help="offered GPU demand / cluster capacity")
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--sweep", type=int, default=50, help="tasks one user submits at once (0: none)")
    parser.add_argument("--high", type=float, default=0.1, help="share of the tasks of high priority")
    parser.add_argument("--preemptible", type=float, default=0.25, help="share of the normal tasks preemptible")
    parser.add_argument("--groups", type=int, default=3, help="quota groups the users are dealt over (0: none)")
    parser.add_argument("--quotas-out", type=Path, help="write the groups' quotas here (JSON)")
    args = parser.parse_args(argv)
    rows = generate(
        args.seed,
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
    if args.quotas_out:
        args.quotas_out.write_text(json.dumps(quotas(args.groups, args.nodes, args.gpus), indent=2) + "\n")
    writer = csv.DictWriter(sys.stdout, fieldnames=HEADER)
    writer.writeheader()
    writer.writerows(rows)


if __name__ == "__main__":
    main()
