"""Chaos, bounded in time: tasks of mixed shapes, priorities and time limits, some preemptible,
flow through real qcluster processes on a real Ray cluster (backfill, preemption) while the
scheduler is SIGKILLed at random moments, random tasks are canceled, the Ray head is replaced
once (a new cluster published in head.json, as the node pool does when a head restarts) and a
worker node under a running task dies whole, twice (a power cut: its driver's node or a node of
its training actors), a new node of its shape joining a few seconds later. Then the invariants:
every task ends in exactly one terminal state (or waits with a reason), no attempt ever had two
Ray jobs and no task two live jobs at once, no Argus job is live without a live attempt, promised
GPUs never exceeded a node's total, only preemptible tasks were ever preempted, no node death was
charged to a task (none FAILED by one, as ARGUS_NODE_FAILURE_RETRIES is not used up here), and
every run a node death interrupted after a checkpoint resumed from one.

ARGUS_CHAOS_SEED picks the run (printed on failure); the default seed is fixed so CI is
repeatable.
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django_q.models import Schedule
from ray.job_submission import JobSubmissionClient

from devkit.ray_cluster import LocalRayCluster, Node
from devkit.standin import standin_spec
from tasks.attempts import Attempt
from tasks.choices import ACTIVE_STATES, QUEUE_STATES, TERMINAL_STATES, FailureKind, TaskState
from tasks.logs.lines import clean_lines
from tasks.models import ClusterState, Task
from tasks.scheduler.settle import AFTER_FAILURE
from tests.conftest import grant_high_priority

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True)]
S = TaskState

# With two node deaths and a head replacement: what a 2-core CI machine settles in time beside
# the other lane of tests.
TASKS = 16
SHAPES = [(1, 1), (1, 2), (1, 4), (2, 2), (2, 4)]
CHAOS_WINDOW_S = 70  # kills, cancels and the head's replacement happen within this window
DEADLINE_S = 420
NODE_KILLS = 2  # fewer than ARGUS_NODE_FAILURE_RETRIES (3): no task may run out of them
REJOIN_AFTER_S = 5  # a killed node's replacement joins this long after (a reboot, shortened)
# Every task checkpoints into its own folder (a node death resumes it), every few steps.
DURABLE = "trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR trainer.save_freq=3"
# The task's own failures: counted against max_retries, or final (tasks.scheduler.settle).
OWN_FAILURES = {kind for kind, rule in AFTER_FAILURE.items() if rule.limit == "max_retries" or rule.retry_to is None}
SAVED = re.compile(r"^local_global_step_folder: .*/global_step_(\d+)$")
STEP = re.compile(r"^step:(\d+) - ")


@dataclass
class Seen:
    """What the test saw of Ray and of the scheduler's promises during the run."""

    jobs: dict[str, dict[str, str]] = field(default_factory=dict)  # submission id -> metadata
    overcommits: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)  # a task with two live Ray jobs at once

    def look(self, client: JobSubmissionClient | None) -> None:
        if client is not None:
            try:
                live: dict[str, list[str]] = {}
                for job in client.list_jobs():
                    task_id = (job.metadata or {}).get("argus_task_id")
                    if job.submission_id and task_id:
                        self.jobs[job.submission_id] = dict(job.metadata or {})
                        if not job.status.is_terminal():
                            live.setdefault(task_id, []).append(job.submission_id)
                self.doubled += [f"{task}: {sids}" for task, sids in live.items() if len(sids) > 1]
            except Exception:
                pass  # the head is being replaced
        state = ClusterState.objects.filter(name="default").first()
        totals = {n["node_id"]: n["gpus_total"] for n in (state.nodes if state else []) if n.get("is_worker")}
        # Admission plans, Ray places: once Ray has placed an attempt (Attempt.nodes) its real
        # room counts, and a promise made before may sit beside it for a moment on the node Ray
        # chose. So each is checked on its own: what Ray placed, and what Argus promised to
        # attempts Ray has not placed yet, never exceed a node. An attempt whose groups Ray
        # released (Attempt.released: it is ending) holds neither.
        placed: Counter[str] = Counter()
        promised: Counter[str] = Counter()
        holders: dict[str, list[str]] = {}
        for attempt in Attempt.objects.live().filter(released=False).only("ray_submission_id", "nodes", "placement"):
            held = attempt.nodes or attempt.placement or {}
            for node, gpus in held.items():
                (placed if attempt.nodes else promised)[node] += int(gpus)
                holders.setdefault(node, []).append(f"{attempt.ray_submission_id} {gpus}")
        for what, counts in (("placed by Ray", placed), ("promised", promised)):
            for node, gpus in counts.items():
                if node in totals and gpus > totals[node]:
                    self.overcommits.append(f"{gpus} GPUs {what} on {node} of {totals[node]}: {holders[node]}")


@pytest.mark.timeout(DEADLINE_S + 240)  # the deadline, plus two clusters' start and stop
def test_chaos(alice, submit, own_cluster, start_qcluster, settings):
    seed = int(os.environ.get("ARGUS_CHAOS_SEED", "20261123"))
    rng = random.Random(seed)
    settings.ARGUS_RETRY_MAX_INTERVAL_S = 2
    settings.ARGUS_PREEMPT_GRACE_S = 2
    cluster = own_cluster(workers=2)
    Schedule.objects.update_or_create(  # the safety net the migration installs in production
        name="argus-tick-safety-net",
        defaults={"func": "tasks.scheduler.loop.run", "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1},
    )
    scheduler = start_qcluster()
    grant_high_priority(alice)  # a fifth of her tasks ask for it

    plan: list[tuple[float, str]] = sorted(
        [(rng.uniform(5, CHAOS_WINDOW_S), "kill") for _ in range(3)]
        + [(rng.uniform(2, CHAOS_WINDOW_S), "cancel") for _ in range(6)]
        + [(rng.uniform(25, 45), "replace_head")]
        + [(rng.uniform(0, CHAOS_WINDOW_S), "submit") for _ in range(TASKS - 12)]
        + [(rng.uniform(8, CHAOS_WINDOW_S - 10), "kill_node") for _ in range(NODE_KILLS)]
    )
    tasks = [_submit_one(rng, alice, submit) for _ in range(12)]
    seen = Seen()
    client: JobSubmissionClient | None = JobSubmissionClient(cluster.job_server_url)
    started = time.monotonic()
    log: list[str] = []
    killed: list[tuple[Node, Attempt]] = []  # each node killed, with the attempt it was under
    while time.monotonic() - started < DEADLINE_S:
        now = time.monotonic() - started
        while plan and plan[0][0] <= now:
            _, action = plan.pop(0)
            if action == "kill_node":
                under = _kill_a_node(rng, cluster)
                if under is None:  # no task running on a worker just now: a little later
                    plan = sorted([*plan, (now + 2, "kill_node")])
                    continue
                killed.append(under)
                plan = sorted([*plan, (now + REJOIN_AFTER_S, f"rejoin {len(killed) - 1}")])
                action = f"kill_node {under[0].name} under {under[1].ray_submission_id}"
            elif action.startswith("rejoin"):
                node = killed[int(action.split()[1])][0]
                if node not in cluster.killed:
                    continue  # its cluster was replaced meanwhile: the new one is whole
                action = f"rejoin as {cluster.add_worker(gpus=node.gpus, cpus=node.cpus).name}"
            log.append(f"{now:.0f}s {action}")
            if action == "kill":
                os.killpg(scheduler.pid, signal.SIGKILL)  # the whole group: a crashed container
                scheduler.wait(10)
                scheduler = start_qcluster()
            elif action == "cancel":
                victim = rng.choice(tasks)
                victim.refresh_from_db()
                if not victim.is_terminal:
                    victim.cancel(actor="api:alice")
            elif action == "replace_head":
                seen.look(client)
                client = None
                cluster.stop()  # the old head and its workers crash, with every job on them
                cluster = own_cluster(workers=2)
                client = JobSubmissionClient(cluster.job_server_url)
            elif action == "submit":
                tasks.append(_submit_one(rng, alice, submit))
        seen.look(client)
        if not plan and all(_settled(task) for task in tasks):
            break
        if int(now) % 15 == 0:  # progress, shown when the test fails
            print(f"{now:.0f}s {dict(Counter(Task.objects.values_list('state', flat=True)))}", flush=True)
        time.sleep(0.5)  # the chaos's own pace: its plan falls due by the clock (qcluster ticks by itself)
    seen.look(client)

    context = f"seed {seed}; chaos: {', '.join(log)}"
    states = Counter(Task.objects.values_list("state", flat=True))
    waiting = [f"{t.task_id} {t.state}: {t.pending_reason}" for t in tasks if not _settled(t)]
    assert not waiting, f"{states}; {waiting} ({context})"
    # Every task ended in exactly one terminal state, or waits with a reason.
    for task in Task.objects.all():
        ends = task.events.filter(to_state__in=TERMINAL_STATES).count()
        if task.state in TERMINAL_STATES:
            assert ends == 1, f"{task.task_id} ended {ends} times ({context})"
        else:
            assert task.state in QUEUE_STATES and task.pending_reason, f"{task.task_id} ({context})"
    # No attempt had two Ray jobs: every job Argus submitted is one attempt's own id.
    attempts = set(Attempt.objects.values_list("ray_submission_id", flat=True))
    assert set(seen.jobs) <= attempts, f"jobs no attempt made: {set(seen.jobs) - attempts} ({context})"
    for sid, metadata in seen.jobs.items():
        assert sid == f"{metadata['argus_task_id']}--a{int(metadata['argus_attempt']):02d}", sid
    # No Argus job is live on Ray without a live attempt (the orphan sweep has run by now).
    live_attempts = set(
        Attempt.objects.filter(task__state__in=ACTIVE_STATES, end_time=None).values_list("ray_submission_id", flat=True)
    )
    live_jobs = {
        job.submission_id
        for job in JobSubmissionClient(cluster.job_server_url).list_jobs()
        if (job.metadata or {}).get("argus_task_id") and not job.status.is_terminal()
    }
    assert live_jobs <= live_attempts, f"orphans: {live_jobs - live_attempts} ({context})"
    assert not seen.overcommits, f"{seen.overcommits[:3]} ({context})"
    preempted = Attempt.objects.filter(failure_kind="PREEMPTED")
    assert not preempted.filter(task__preemptible=False).exists(), context
    assert not seen.doubled, f"two live Ray jobs of one task: {seen.doubled[:3]} ({context})"
    _check_node_deaths(killed, context)
    print(f"preempted attempts: {preempted.count()}; {states}", flush=True)
    for failed in Task.objects.filter(state=S.FAILED):  # why, for whoever reads the run
        kinds = list(failed.attempts.values_list("failure_kind", flat=True))
        print(f"failed: {failed.task_id} {kinds}: {failed.error_summary}", flush=True)
    assert states[S.SUCCEEDED] >= TASKS // 2, f"{states} ({context})"  # the chaos did not stop the work


def _submit_one(rng: random.Random, user, submit) -> Task:
    nnodes, gpus = rng.choice(SHAPES)
    extra = "time_limit: 2m\n"  # backfill plans with it
    steps = rng.randint(2, 5)
    roll = rng.random()
    if roll < 0.2:
        extra += "priority: high\n"
    elif roll < 0.5:
        extra += "preemptible: true\n"
        steps = rng.randint(20, 40)  # long enough for a high task to come and need its room
    return submit(user, standin_spec(nnodes=nnodes, gpus=gpus, steps=steps, step_s=0.2, extra=DURABLE) + extra)


def _settled(task: Task) -> bool:
    task.refresh_from_db()
    return task.state in TERMINAL_STATES


def _kill_a_node(rng: random.Random, cluster: LocalRayCluster) -> tuple[Node, Attempt] | None:
    """Kill a worker under a running attempt: its driver's node or one of its training nodes."""
    workers = {node.node_id: node for node in cluster.workers}
    running = Attempt.objects.filter(task__state=S.RUNNING, end_time=None).order_by("pk")
    candidates = [
        (workers[node_id], attempt)
        for attempt in running
        for node_id in sorted({attempt.node_id, *attempt.nodes})
        if node_id in workers
    ]
    if not candidates:
        return None
    node, attempt = rng.choice(candidates)
    cluster.kill_node(node)
    return node, attempt


def _checkpoints(attempt: Attempt) -> list[int]:
    """The steps whose checkpoint the attempt's log shows complete (PPO saves before the
    step's metrics line, so a step's line after its save means the save is whole)."""
    log = Path(attempt.log_path)
    saved, done = set(), set()
    for line in clean_lines(log.read_text() if log.exists() else ""):
        if match := SAVED.match(line):
            saved.add(int(match[1]))
        elif match := STEP.match(line):
            done.add(int(match[1]))
    return sorted(saved & done)


def _check_node_deaths(killed: list[tuple[Node, Attempt]], context: str) -> None:
    assert len(killed) == NODE_KILLS, context
    deaths = Attempt.objects.filter(failure_kind=FailureKind.NODE_FAILURE)
    kinds = {a.ray_submission_id: Attempt.objects.get(pk=a.pk).failure_kind for _, a in killed}
    print(f"node kills: {kinds}; NODE_FAILURE attempts: {deaths.count()}", flush=True)
    assert deaths.exists(), f"no node death seen as one: {kinds} ({context})"
    # A death is never taken for the task's own failure (a victim may also have ended otherwise:
    # preempted or canceled as it died, LOST with the head, done just before).
    for sid, kind in kinds.items():
        assert kind not in OWN_FAILURES, f"{sid} ended {kind} under a node death ({context})"
    # None FAILED by a node death: ARGUS_NODE_FAILURE_RETRIES (3) is more than the kills.
    for task in Task.objects.filter(state=S.FAILED):
        last = task.attempts.order_by("attempt_no").last()
        assert last is None or last.failure_kind != FailureKind.NODE_FAILURE, f"{task.task_id} ({context})"
    # Every run a node death interrupted after a checkpoint resumed from one.
    for death in deaths:
        following = Attempt.objects.filter(task=death.task, attempt_no=death.attempt_no + 1, resume_known=True).first()
        saved = _checkpoints(death)
        if following is not None and saved:
            resumed = following.resumed_from_step
            assert resumed is not None and resumed >= saved[-1], (
                f"{following.ray_submission_id} resumed from {resumed}; {saved} saved before ({context})"
            )
