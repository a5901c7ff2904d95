"""bench/policy_sim.py as a user runs it: a trace small enough to work out by hand, through the
scheduler's own admission code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Two nodes of 8 GPUs. A holds node 1 until 100 s; B needs both nodes (EASY reserves them at
# 100 s); C fits now and ends by its limit (61 s) before that: backfill starts it at once, strict
# FIFO after B (150 s). D would still run at 100 s on a reserved node: it waits for B either way.
TRACE = """\
arrive_s,user,nnodes,gpus_per_node,run_s,time_limit_s,priority,preemptible
0,alice,1,8,100,100,normal,false
0,bob,2,8,50,50,normal,false
1,carol,1,8,50,60,normal,false
2,dave,1,4,500,500,normal,false
"""


def run(trace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "bench" / "policy_sim.py"), "--trace", str(trace), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_each_policy_on_a_trace_worked_out_by_hand(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    result = run(trace, "--nodes", "2", "--gpus", "8")
    assert result.returncode == 0, result.stderr
    rows = {row["policy"]: row for row in map(json.loads, result.stdout.splitlines())}
    assert list(rows) == ["strict_fifo", "best_effort_fifo", "backfill", "default"]
    # Waits: strict A 0, B 100, C 149, D 148; backfill A 0, B 100, C 0, D 148.
    assert (rows["strict_fifo"]["mean_wait_s"], rows["strict_fifo"]["max_wait_s"]) == (99.2, 149.0)
    assert (rows["backfill"]["mean_wait_s"], rows["backfill"]["max_wait_s"]) == (62.0, 148.0)
    # Best effort starts D when C ends (51 s), on the node B needs: B starves until D ends (551 s).
    assert (rows["best_effort_fifo"]["mean_wait_s"], rows["best_effort_fifo"]["max_wait_s"]) == (150.0, 551.0)
    assert rows["default"]["mean_wait_vs_backfill"] == round(rows["default"]["mean_wait_s"] / 62.0, 3)
    for row in rows.values():
        assert {"policy", "mean_wait_s", "p95_wait_s", "max_wait_s", "utilization"} <= set(row)
        assert 0 < row["utilization"] <= 1


def test_a_bad_trace_is_named(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("arrive_s,user,nnodes,gpus_per_node,run_s\n0,alice,two,8,50\n")
    result = run(trace)
    assert result.returncode != 0
    assert "line 2: invalid literal for int() with base 10: 'two'" in result.stderr
    missing = run(tmp_path / "none.csv")
    assert "no such file" in missing.stderr
