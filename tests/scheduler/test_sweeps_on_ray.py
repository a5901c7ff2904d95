"""A sweep's cap on a real Ray cluster, through the stand-in trainer (tests/standin): what Ray
itself runs, by its own job list and clock, never exceeds max_concurrent."""

from __future__ import annotations

import pytest
import yaml
from ray.job_submission import JobSubmissionClient

from tasks.choices import TERMINAL_STATES, SweepState, TaskState
from tasks.sweeps.models import Sweep
from tests.scheduler.conftest import tick_until

pytestmark = pytest.mark.ray
S = TaskState
LR = "actor_rollout_ref.actor.optim.lr"


def peak(spans: dict[str, tuple[int, int]]) -> int:
    """The most jobs on Ray at one instant, from each job's (start_time, end_time) as Ray gives
    them (ms): a job ending at the very ms another starts is not counted with it."""
    moves = sorted([(start, 1) for start, _ in spans.values()] + [(end, -1) for _, end in spans.values()])
    running = most = 0
    for _, move in moves:
        running += move
        most = max(most, running)
    return most


def test_a_4_trial_sweep_with_max_concurrent_2_never_has_more_than_2_trials_on_ray(on_ray, client_for, alice, settings):
    settings.ARGUS_RAY_SWEEP_S = 3600  # the ended jobs stay in Ray's table (after the first tick's sweep), to be read
    base = {
        "kind": "advanced",
        "workload": "ppo",
        "nnodes": 1,
        "n_gpus_per_node": 1,
        # One GPU each: all four would fit on the cluster's eight at once; only the cap holds them.
        "command": "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=1 "
        "+standin.steps=2 +standin.step_s=0.05",
    }
    document = {"name": "cap", "base": base, "grid": {LR: [1e-6, 2e-6, 3e-6, 4e-6]}, "max_concurrent": 2}
    response = client_for(alice).post("/api/v2/sweeps", yaml.safe_dump(document), content_type="application/yaml")
    assert response.status_code == 201, response.content
    sweep = Sweep.objects.get(sweep_id=response.json()["sweep_id"])
    trial_ids = {task.task_id for task in sweep.trials.all()}
    ray = JobSubmissionClient(on_ray.job_server_url)
    spans: dict[str, tuple[int, int]] = {}  # Ray's (start_time, end_time) of each trial's ended job
    live: list[int] = []  # after each tick: the trials' jobs Ray has not ended
    admitted: list[int] = []  # after each tick: the trials Argus counts against the cap
    reasons: set[str] = set()

    def look() -> None:
        jobs = [job for job in ray.list_jobs() if (job.metadata or {}).get("argus_task_id") in trial_ids]
        live.append(sum(1 for job in jobs if not job.status.is_terminal()))
        for job in jobs:
            if job.status.is_terminal() and job.submission_id and job.start_time and job.end_time:
                spans[job.submission_id] = (job.start_time, job.end_time)
        admitted.append(sweep.trials.exclude(state__in=(S.WAITING, *TERMINAL_STATES)).count())
        reasons.update(sweep.trials.filter(state=S.WAITING).values_list("pending__text", flat=True))

    def ended() -> bool:
        sweep.refresh_from_db()
        return sweep.is_finished

    tick_until(ended, timeout=90, every=0.2, on_tick=look)
    look()  # the last jobs' ends, as Ray gives them
    assert sweep.state == SweepState.SUCCEEDED
    assert sorted(sweep.trials.values_list("state", flat=True)) == [S.SUCCEEDED] * 4
    assert max(admitted) == 2 and max(live) <= 2
    # Ray's own clock: every trial ran there once, two at a time at the most, and two at once
    # (the cap was reached, not a run one by one).
    assert len(spans) == 4, spans
    assert peak(spans) == 2, spans
    assert reasons <= {"sweep cap: 2 of 2 trials running", "sweep cap: 1 of 2 trials running"}, reasons
    assert "sweep cap: 2 of 2 trials running" in reasons
