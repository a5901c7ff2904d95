"""bench/policy_sim.py as a user runs it: a trace small enough to work out by hand, through the
scheduler's own admission code."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from bench import policy_sim, policy_sweep
from tasks.scheduler.quotas import GroupQuota

ROOT = Path(__file__).resolve().parents[2]

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


# Preemption, worked out by hand: the simulator itself, with the settings as they ship
# (backfill, a grace of 120 s, a minimum run of 600 s after a resume) but no fair share.
PREEMPTING = policy_sim.Config(
    policy="default",
    scheduling="backfill",
    preemption=True,
    grace_s=120.0,
    min_run_s=600.0,
)
HEADER = "arrive_s,user,nnodes,gpus_per_node,run_s,time_limit_s,priority,preemptible,checkpoint_s\n"


def simulate(
    rows: str, gpus: int, config: policy_sim.Config = PREEMPTING, nodes: int = 1
) -> dict[str, float | int | str]:
    tasks = policy_sim.read_rows(csv.DictReader(io.StringIO(HEADER + rows)))
    return policy_sim.Simulation(tasks, nodes, gpus, config).run()


def figures(result: dict[str, float | int | str]) -> tuple[object, ...]:
    names = ("preemptions", "withdrawn", "wasted_gpu_h", "high_mean_wait_s", "normal_mean_wait_s", "makespan_s")
    return tuple(result[name] for name in names)


# One node of 4 GPUs. alice's preemptible task checkpoints every 100 s of work; bob's high task
# comes at 250 s and needs the node.
AT_A_CHECKPOINT = """\
0,alice,1,4,1000,,normal,true,100
250,bob,1,4,500,600,high,false,
"""


def test_a_victim_stops_at_its_next_checkpoint_and_loses_nothing() -> None:
    # Chosen at 250, it saves at 300 (before its grace ends at 370) and stops: bob starts at 300
    # (waited 50) and ends at 800; alice resumes from 300 s of work then, and ends at 1500.
    result = simulate(AT_A_CHECKPOINT, gpus=4)
    assert figures(result) == (1, 0, 0.0, 50.0, 500.0, 1500.0)
    assert result["utilization"] == 1.0  # nothing redone, no GPU idle


def test_without_preemption_the_high_task_waits_for_the_victims_end() -> None:
    result = simulate(AT_A_CHECKPOINT, gpus=4, config=replace(PREEMPTING, preemption=False))
    assert figures(result) == (0, 0, 0.0, 750.0, 0.0, 1500.0)


def test_a_victim_whose_grace_passes_first_redoes_the_work_since_its_checkpoint() -> None:
    # Checkpoints every 1000 s; chosen at 1250, its grace ends at 1370 before its save at 2000:
    # it stops with 1370 s done, 1000 saved: 4 GPUs x 370 s redone = 1480 GPU-s. bob runs
    # 1370-1870; alice resumes with 2000 s to go and ends at 3870.
    result = simulate("0,alice,1,4,3000,,normal,true,1000\n1250,bob,1,4,500,600,high,false,\n", gpus=4)
    assert figures(result) == (1, 0, round(1480 / 3600, 3), 120.0, 500.0, 3870.0)
    assert result["utilization"] == 1.0  # redone work is busy time too


def test_a_preemption_is_withdrawn_when_the_task_it_serves_starts_elsewhere() -> None:
    # 8 GPUs: alice (preemptible) and carol (until 1300) hold 4 each. bob's task comes at 1250;
    # alice is chosen (she would stop at 1370), but carol ends at 1300 and bob starts there:
    # alice runs on, whole.
    rows = """\
0,alice,1,4,5000,,normal,true,1000
0,carol,1,4,1300,1300,normal,false,
1250,bob,1,4,500,600,high,false,
"""
    assert figures(simulate(rows, gpus=8)) == (0, 1, 0.0, 50.0, 0.0, 5000.0)


# One node of 4 GPUs; alice saves every 400 s. bob's first high task makes her stop at her
# checkpoint at 400 (he runs 400-900); she resumes at 900 from 400; his second comes at 1000.
TWICE = """\
0,alice,1,4,3000,,normal,true,400
350,bob,1,4,500,600,high,false,
1000,bob,1,4,500,600,high,false,
"""


def test_a_resumed_task_runs_its_minimum_before_it_is_chosen_again() -> None:
    # Not preemptible until 1500 (600 s after its restart): chosen then with 1000 s done, next
    # save at 1200 of work (1700) after its grace (1620): stops with 1120 done, 800 saved (4 x 320
    # GPU-s redone). bob's second waits 620; alice resumes at 2120 with 2200 to go.
    result = simulate(TWICE, gpus=4)
    assert figures(result) == (2, 0, round(1280 / 3600, 3), (50 + 620) / 2, 1000.0, 4320.0)


def test_without_the_minimum_run_a_resumed_task_is_chosen_at_once() -> None:
    # Chosen at 1000 with 500 done: its grace (1120) comes before its save at 800 of work (1300):
    # 4 x 220 GPU-s redone; bob's second waits 120; alice resumes at 1620 from 400.
    result = simulate(TWICE, gpus=4, config=replace(PREEMPTING, min_run_s=0.0))
    assert figures(result) == (2, 0, round(880 / 3600, 3), (50 + 120) / 2, 1000.0, 4220.0)


# 8 GPUs; alice (preemptible, saves every 200 s, limit 6000) holds 4. bob's high task (8 GPUs)
# and carol's short one (4 GPUs, limit 400) come together at 100.
BACKFILLED = """\
0,alice,1,4,5000,6000,normal,true,200
100,bob,1,8,500,600,high,false,
100,carol,1,4,300,400,normal,false,
"""


def test_backfill_keeps_off_the_room_a_preemption_frees() -> None:
    # decide() chooses alice for bob and plans her room free at 220 (now + grace): bob's
    # reservation is 220-820 on all 8 GPUs, and carol (100-500 by her limit) would overlap it:
    # she waits. alice saves at 200 and stops, nothing lost; bob starts at 200 (waited 100), ends
    # at 700. alice and carol start then (waited 500 and 600); alice resumes from 200, ends 5500.
    result = simulate(BACKFILLED, gpus=8)
    assert figures(result) == (1, 0, 0.0, 100.0, 550.0, 5500.0)
    assert result["utilization"] == round((4 * 5000 + 8 * 500 + 4 * 300) / (8 * 5500), 4)


def test_a_victim_does_not_take_back_its_room_while_the_task_it_stopped_for_waits() -> None:
    # 8 GPUs, best-effort FIFO (no reservation keeps the room). alice (saves every 200 s) and dave
    # (every 1000 s) hold 4 each; bob's high task needs all 8: both are chosen at 100. alice
    # saves at 200 and stops; dave's grace ends at 220 (150 s done, none saved: 4 x 170 GPU-s
    # redone). From 200 to 220 alice would fit the 4 free GPUs, but yields to bob, who starts at
    # 220 (waited 120) and ends at 720; alice (from 200 of work) and dave (from 0) restart then.
    rows = """\
0,alice,1,4,5000,6000,normal,true,200
50,dave,1,4,5000,6000,normal,true,1000
100,bob,1,8,500,600,high,false,
"""
    result = simulate(rows, gpus=8, config=replace(PREEMPTING, scheduling="best_effort_fifo"))
    assert figures(result) == (2, 0, round(680 / 3600, 3), 120.0, (520 + 500) / 2, 5720.0)


# Two nodes of 8 GPUs. alice (preemptible, saves every 1000 s) holds 4 of n0, erin 6 of n1. At
# 100 bob's high task (8 GPUs: only n0 without alice) comes with a short task of his (2 GPUs,
# runs 60 s, limit 3600).
CAPPED = """\
0,alice,1,4,5000,6000,normal,true,1000
0,erin,1,6,5000,6000,normal,false,
100,bob,1,8,500,600,high,false,
100,bob,1,2,60,3600,normal,false,
"""


def test_a_preemption_is_withdrawn_while_its_task_is_held_by_its_users_limit() -> None:
    # No user may run more than one task. At 100 decide() chooses alice for bob's high task
    # (n0 reserved from 220, the end of her grace) and starts his short one in n1's spare room.
    # The pass after, admission.preemption_holds: bob runs a task now, the limit is one: the
    # choice is withdrawn. At 160 his short task ends; alice is chosen again, her grace
    # restarted: she stops at 280 with none of her 280 s saved (4 x 280 GPU-s redone). bob's
    # high task waits 180 and ends at 780, when alice restarts from 0 (ends 5780).
    capped = replace(PREEMPTING, caps=policy_sim.admission.Caps(0, 1))
    result = simulate(CAPPED, gpus=8, config=capped, nodes=2)
    assert figures(result) == (1, 1, round(1120 / 3600, 3), 180.0, round(500 / 3, 1), 5780.0)


def test_without_the_limit_the_preemption_holds() -> None:
    # The same trace, no limit: alice stops at 220 (4 x 220 GPU-s redone); bob's high task runs
    # 220-720, alice 720-5720.
    result = simulate(CAPPED, gpus=8, nodes=2)
    assert figures(result) == (1, 0, round(880 / 3600, 3), 120.0, round(500 / 3, 1), 5720.0)


def test_the_command_runs_the_same_trace_with_preemption_and_without(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + AT_A_CHECKPOINT)
    result = run(trace, "--nodes", "1", "--gpus", "4", "--policies", "default", "--preemption", "both")
    assert result.returncode == 0, result.stderr
    on, off, both = map(json.loads, result.stdout.splitlines())
    assert (on["preemption"], off["preemption"]) == (1, 0)
    assert both["compare"] == "preemption on / off"
    assert both["high_mean_wait_s"] == [50.0, 750.0]
    assert both["normal_mean_wait_s"] == [500.0, 0.0]
    assert both["high_mean_wait_on_vs_off"] == round(50 / 750, 3)
    assert both["normal_mean_wait_on_vs_off"] is None  # without preemption alice never waits


def test_a_bad_preemption_field_is_named(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    for row, message in (
        ("0,alice,1,4,50,,urgent,false,", "line 2: priority 'urgent': use normal or high"),
        ("0,alice,1,4,50,,high,maybe,", "line 2: preemptible 'maybe': use true or false"),
        ("0,alice,1,4,50,,high,true,0", "line 2: checkpoint_s must be more than 0"),
    ):
        trace.write_text(HEADER + row + "\n")
        result = run(trace)
        assert result.returncode != 0
        assert message in result.stderr


# Quota groups (issue 27 item 7): one node of 8 GPUs, vision and nlp 4 each. alice (vision)
# needs the whole node: beyond vision's 4, she borrows nlp's idle 4. bob (nlp) comes at 250
# within nlp's quota: a reclaim takes it back from her.
GROUP_HEADER = HEADER.rstrip("\n") + ",group\n"
QUOTAS = {"vision": GroupQuota(4), "nlp": GroupQuota(4)}
RECLAIMING = replace(PREEMPTING, reclaim_grace_s=300.0)


GroupRow = dict[str, float | int | str | None]


def quota_run(rows: str, mode: str) -> tuple[dict[str, float | int | str], dict[str, GroupRow]]:
    tasks = policy_sim.read_rows(csv.DictReader(io.StringIO(GROUP_HEADER + rows)))
    simulation = policy_sim.Simulation(tasks, 1, 8, policy_sim.with_quotas(RECLAIMING, QUOTAS, mode))
    result = simulation.run()
    return result, {str(row["group"]): row for row in simulation.per_group(QUOTAS)}


def group_figures(row: GroupRow) -> tuple[object, ...]:
    names = ("tasks", "never_started", "mean_wait_s", "borrowed_share", "quota_waits", "quota_wait_max_s")
    return (*(row[name] for name in names), row["wasted_gpu_h"], row["utilization"])


def test_quota_modes_on_a_trace_worked_out_by_hand() -> None:
    # alice saves every 100 s.
    rows = "0,alice,1,8,1000,1000,normal,false,100,vision\n250,bob,1,4,500,600,normal,false,,nlp\n"
    # No quotas: bob waits for alice's end (750 s); vision used 8 GPU x 1000 s of its 4 x 1500.
    result, groups = quota_run(rows, "none")
    assert (result["reclaims"], result["mean_wait_s"], result["never_started"]) == (0, 375.0, 0)
    assert group_figures(groups["vision"]) == (1, 0, 0.0, 0.0, 0, 0.0, 0.0, round(8000 / (4 * 1500), 3))
    # Hard quotas: alice can never start (8 GPUs, a nominal of 4, no borrowing); bob at once.
    result, groups = quota_run(rows, "hard")
    assert (result["reclaims"], result["never_started"], result["max_wait_s"]) == (0, 1, 0.0)
    assert group_figures(groups["vision"])[:2] == (0, 1)
    # Borrowing: reclaimed at 250, alice saves at 300 (within the reclaim grace) and stops losing
    # nothing; bob waits 50 s for his quota, then runs 300-800; alice cannot borrow again before
    # (nlp lends nothing while bob runs), resumes at 800 from 300 s and ends at 1500, borrowed
    # both times.
    result, groups = quota_run(rows, "borrow")
    assert (result["reclaims"], result["preemptions"], result["wasted_gpu_h"], result["makespan_s"]) == (
        1,
        1,
        0.0,
        1500.0,
    )
    assert group_figures(groups["nlp"]) == (1, 0, 50.0, 0.0, 1, 50.0, 0.0, round(2000 / (4 * 1500), 3))
    assert group_figures(groups["vision"]) == (1, 0, 500.0, 1.0, 0, 0.0, 0.0, round(8000 / (4 * 1500), 3))


def test_a_reclaimed_task_with_no_checkpoint_due_stops_at_once_and_redoes_its_work() -> None:
    # alice saves every 1000 s: none due within the grace at 250, so she stops at once and redoes
    # 8 GPUs x 250 s; bob starts at 250; alice resumes at 750 from nothing and ends at 1750.
    rows = "0,alice,1,8,1000,1000,normal,false,1000,vision\n250,bob,1,4,500,600,normal,false,,nlp\n"
    result, groups = quota_run(rows, "borrow")
    assert (result["reclaims"], result["wasted_gpu_h"], result["makespan_s"]) == (1, round(2000 / 3600, 3), 1750.0)
    assert group_figures(groups["vision"])[:3] == (1, 0, 500.0)
    assert groups["vision"]["wasted_gpu_h"] == round(2000 / 3600, 3)
    assert groups["nlp"]["quota_waits"] == 0  # alice stopped the moment bob came


def test_generated_groups_through_the_command_line(tmp_path: Path) -> None:
    trace, quotas = tmp_path / "trace.csv", tmp_path / "quotas.json"
    command = [sys.executable, str(ROOT / "bench" / "trace_gen.py"), "--tasks", "60", "--sweep", "10"]
    made = subprocess.run(
        [*command, "--groups", "2", "--quotas-out", str(quotas)], capture_output=True, text=True, timeout=60
    )
    assert made.returncode == 0, made.stderr
    trace.write_text(made.stdout)
    # Whole nodes summing to the cluster (8 x 8), every user in one of the two groups.
    assert json.loads(quotas.read_text()) == {
        "vision": {"nominal": 32, "borrow_limit": None, "lend_limit": None},
        "nlp": {"nominal": 32, "borrow_limit": None, "lend_limit": None},
    }
    rows = list(csv.DictReader(io.StringIO(made.stdout)))
    assert {row["group"] for row in rows} == {"vision", "nlp"}
    assert len({(row["user"], row["group"]) for row in rows}) == len({row["user"] for row in rows})
    # The other columns are those the same seed gave without groups.
    plain = subprocess.run([*command, "--groups", "0"], capture_output=True, text=True, timeout=60)
    assert [{**row, "group": ""} for row in rows] == list(csv.DictReader(io.StringIO(plain.stdout)))
    result = run(trace, "--policies", "backfill,default", "--groups", str(quotas), "--quotas", "none,borrow")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["policy"], line["quotas"], line.get("group")) for line in lines] == [
        ("backfill", "none", None),
        ("default", "none", None),
        ("default", "none", "vision"),
        ("default", "none", "nlp"),
        ("default", "borrow", None),
        ("default", "borrow", "vision"),
        ("default", "borrow", "nlp"),
    ]
    for line in lines:
        if "group" in line:
            assert sum(1 for row in rows if row["group"] == line["group"]) == line["tasks"] + line["never_started"]
    bad = run(trace, "--groups", '{"vision": {"nominal": -1}}')
    assert bad.returncode != 0 and "group 'vision': GPUs may not be negative" in bad.stderr


def test_the_longest_waiter_and_whether_it_outgrows_its_groups_quota() -> None:
    # Borrowing, as worked out above: alice (8 GPUs, vision's nominal 4) waits 500 s, the longest.
    rows = "0,alice,1,8,1000,1000,normal,false,100,vision\n250,bob,1,4,500,600,normal,false,,nlp\n"
    result, _ = quota_run(rows, "borrow")
    assert (result["longest_waiter_gpus"], result["longest_waiter_group"]) == (8, "vision")
    assert policy_sweep.oversized(result, QUOTAS)
    # No quotas: bob (4 GPUs, nlp's nominal 4) is the one who waits; he fits his group's quota.
    result, _ = quota_run(rows, "none")
    assert (result["longest_waiter_gpus"], result["longest_waiter_group"]) == (4, "nlp")
    assert not policy_sweep.oversized(result, QUOTAS)


def test_jitter_moves_each_arrival_later_by_less_than_the_seconds_and_nothing_else() -> None:
    tasks = policy_sim.read_rows(csv.DictReader(io.StringIO(TRACE)))
    moved = policy_sweep.jitter(tasks, 60.0, 7)
    assert moved == policy_sweep.jitter(tasks, 60.0, 7)  # the seed's own stream
    assert moved != policy_sweep.jitter(tasks, 60.0, 8)
    assert all(0 <= m.arrive - t.arrive < 60 for m, t in zip(moved, tasks, strict=True))
    assert any(m.arrive != t.arrive for m, t in zip(moved, tasks, strict=True))
    assert [replace(m, arrive=t.arrive) for m, t in zip(moved, tasks, strict=True)] == tasks
