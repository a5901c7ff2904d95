"""Chaos, bounded in time: tasks of mixed shapes, priorities and time limits, some preemptible,
flow through real qcluster processes on a real Ray cluster (backfill, preemption) while the
scheduler is SIGKILLed at random moments, random tasks are canceled and the Ray head is replaced
once (a new cluster published in head.json, as the node pool does when a head restarts). Then the
invariants: every task ends in exactly one terminal state (or waits with a reason), no attempt
ever had two Ray jobs, no Argus job is live without a live attempt, promised GPUs never exceeded a
node's total, and only preemptible tasks were ever preempted.

ARGUS_CHAOS_SEED picks the run (printed on failure); the default seed is fixed so CI is
repeatable.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from django_q.models import Schedule
from ray.job_submission import JobSubmissionClient

from tasks.models import ACTIVE_STATES, TERMINAL_STATES, WAITING_STATES, Attempt, ClusterState, Task, TaskState
from tasks.scheduler.launch import promised_gpus
from tests.conftest import grant_high_priority
from tests.scheduler.conftest import standin_spec

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True)]
S = TaskState

TASKS = 30
SHAPES = [(1, 1), (1, 2), (1, 4), (2, 2), (2, 4)]
CHAOS_WINDOW_S = 70  # kills, cancels and the head's replacement happen within this window
DEADLINE_S = 420


@dataclass
class Seen:
    """What the test saw of Ray and of the scheduler's promises during the run."""

    jobs: dict[str, dict[str, str]] = field(default_factory=dict)  # submission id -> metadata
    overcommits: list[str] = field(default_factory=list)

    def look(self, client: JobSubmissionClient | None) -> None:
        if client is not None:
            try:
                for job in client.list_jobs():
                    if job.submission_id and (job.metadata or {}).get("argus_task_id"):
                        self.jobs[job.submission_id] = dict(job.metadata or {})
            except Exception:
                pass  # the head is being replaced
        state = ClusterState.objects.filter(name="default").first()
        totals = {n["node_id"]: n["gpus_total"] for n in (state.nodes if state else []) if n.get("is_worker")}
        for node, gpus in promised_gpus().items():
            if node in totals and gpus > totals[node]:
                self.overcommits.append(f"{gpus} GPUs promised on {node} of {totals[node]}")


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
    )
    tasks = [_submit_one(rng, alice, submit) for _ in range(12)]
    seen = Seen()
    client: JobSubmissionClient | None = JobSubmissionClient(cluster.job_server_url)
    started = time.monotonic()
    log: list[str] = []
    while time.monotonic() - started < DEADLINE_S:
        now = time.monotonic() - started
        while plan and plan[0][0] <= now:
            _, action = plan.pop(0)
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
                cluster.stop()  # the old head and its workers are gone, with every job on them
                cluster = own_cluster(workers=2)
                client = JobSubmissionClient(cluster.job_server_url)
            elif action == "submit":
                tasks.append(_submit_one(rng, alice, submit))
        seen.look(client)
        if not plan and all(_settled(task) for task in tasks):
            break
        if int(now) % 15 == 0:  # progress, shown when the test fails
            print(f"{now:.0f}s {dict(Counter(Task.objects.values_list('state', flat=True)))}", flush=True)
        time.sleep(0.5)
    seen.look(client)

    context = f"seed {seed}; chaos: {', '.join(log)}"
    states = Counter(Task.objects.values_list("state", flat=True))
    assert all(_settled(task) for task in tasks), f"{states} ({context})"
    # Every task ended in exactly one terminal state, or waits with a reason.
    for task in Task.objects.all():
        ends = task.events.filter(to_state__in=TERMINAL_STATES).count()
        if task.state in TERMINAL_STATES:
            assert ends == 1, f"{task.task_id} ended {ends} times ({context})"
        else:
            assert task.state in WAITING_STATES and task.pending_reason, f"{task.task_id} ({context})"
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
    return submit(user, standin_spec(nnodes=nnodes, gpus=gpus, steps=steps, step_s=0.2) + extra)


def _settled(task: Task) -> bool:
    task.refresh_from_db()
    return task.state in TERMINAL_STATES
