"""Task-page test data: what the scheduler records of Ray, and a task that has run a while."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from raypool.discovery import HeadRecord, head_file_from_settings, write_head
from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.jobfiles import driver_log_path
from tasks.models import ClusterState, Task

NODES = [
    {
        "node_id": "a1" * 14,
        "ip": "10.0.0.1",
        "alive": True,
        "is_head": True,
        "is_worker": False,
        "gpus_total": 0,
        "gpus_free": 0,
        "cpus_total": 8,
        "cpus_free": 8,
    },
    {
        "node_id": "b2" * 14,
        "ip": "10.0.0.2",
        "alive": True,
        "is_head": False,
        "is_worker": True,
        "gpus_total": 4,
        "gpus_free": 1,
        "cpus_total": 32,
        "cpus_free": 20,
    },
    {
        "node_id": "c3" * 14,
        "ip": "10.0.0.3",
        "alive": True,
        "is_head": False,
        "is_worker": True,
        "gpus_total": 4,
        "gpus_free": 4,
        "cpus_total": 32,
        "cpus_free": 32,
    },
]

# What verl prints, as Ray passes it on: an actor prefix, colours, numpy reprs.
VERL_LOG = """\
(TaskRunner pid=3165) Total training steps: 10
(TaskRunner pid=3165) \x1b[36mstep:1 - critic/score/mean:0.12 - actor/pg_loss:np.float64(0.51) - timing_s/step:1.9
(TaskRunner pid=3165) step:2 - critic/score/mean:0.25 - actor/pg_loss:np.float64(0.43) - timing_s/step:1.7
(TaskRunner pid=3165) step:3 - critic/score/mean:0.31 - actor/pg_loss:np.float64(0.40) - timing_s/step:1.8
"""


def verl_log(steps: range, *, total: int = 10, resumed_from: int | None = None) -> str:
    """A driver log as verl writes it for one attempt: the resume check (its own words), the
    total, then a ``step:N`` line per step. ``resumed_from``: the checkpoint step it loaded."""
    prefix = "(TaskRunner pid=3165) "
    lines = [f"{prefix}Total training steps: {total}"]
    if resumed_from is None:
        lines.append(f"{prefix}Training from scratch")
    else:
        folder = f"/private/users/alice/jobs/alice-ppo-20261123-101500-3f2a/checkpoints/global_step_{resumed_from}"
        lines += [
            f"{prefix}Load from checkpoint folder: {folder}",
            f"{prefix}Setting global step to {resumed_from}",
            f"{prefix}Resuming from {folder}",
        ]
    for step in steps:
        # Distinct values per attempt and step, so a test can tell whose point it sees.
        base = 0.1 * step + (0.5 if resumed_from is not None else 0.0)
        lines.append(
            f"{prefix}step:{step} - critic/score/mean:{base:.3f} - actor/pg_loss:np.float64({1 - base:.3f})"
            f" - timing_s/step:{1.5 + step / 100:.2f}"
        )
    return "\n".join(lines) + "\n"


def ray_up(checked_ago: timedelta = timedelta(seconds=2)) -> ClusterState:
    """Ray as a scheduler that just looked saw it: a head and two 4-GPU workers, head.json fresh."""
    write_head(
        head_file_from_settings(),
        HeadRecord.new(
            cluster_name=settings.ARGUS_CLUSTER_NAME,
            head_ip="10.0.0.1",
            gcs_port=6379,
            dashboard_port=8265,
            ttl_s=60,
        ),
    )
    return ClusterState.objects.create(
        name="default",
        reachable=True,
        job_server_url="http://10.0.0.1:8265",
        nodes=NODES,
        checked_at=timezone.now() - checked_ago,
    )


def ray_down(error: str = "RayUnavailable: ConnectionError: 10.0.0.1:8265 refused") -> ClusterState:
    return ClusterState.objects.create(name="default", reachable=False, error=error, checked_at=timezone.now())


def run_attempt(task: Task, *, log: str | None = VERL_LOG, **fields: Any) -> Attempt:
    """An attempt of ``task`` on Ray, with its driver.log written where the scheduler puts it."""
    number = task.attempts.count() + 1
    submission_id = Attempt.submission_id_for(task.task_id, number)
    path = driver_log_path(task.user.username, submission_id)
    if log is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(log)
    values: dict[str, Any] = {
        "ray_status": "RUNNING",
        "submitted_at": timezone.now() - timedelta(minutes=5),
        "start_time": timezone.now() - timedelta(minutes=4),
        "gpus": task.total_gpus,
        **fields,
    }
    return Attempt.objects.create(
        task=task, attempt_no=number, ray_submission_id=submission_id, log_path=str(path), **values
    )


def running_task(make_task: Any, user: Any, **changes: Any) -> Task:
    """A RUNNING task with one attempt whose log holds three of ten steps."""
    task = make_task(user, state=TaskState.RUNNING, **changes)
    attempt = run_attempt(task)
    task.record(
        EventKind.SUBMIT,
        actor="scheduler",
        attempt=attempt,
        from_state=TaskState.QUEUED,
        to_state=TaskState.SUBMITTED,
        message="Submitted to Ray.",
    )
    task.record(
        EventKind.STATE_TRANSITION,
        actor="scheduler",
        attempt=attempt,
        from_state=TaskState.SUBMITTED,
        to_state=TaskState.RUNNING,
        message="Ray reports the job RUNNING.",
    )
    return task


def resumed_task(make_task: Any, user: Any, *, started_ago: timedelta = timedelta(minutes=4), **changes: Any) -> Task:
    """A RUNNING task on its second attempt: attempt 1 saved a checkpoint at step 3 and stalled
    after step 5; attempt 2, started ``started_ago``, resumed from step 3 and is at step 7."""
    task = make_task(user, **{"state": TaskState.RUNNING, **changes})
    now = timezone.now()
    run_attempt(
        task,
        log=verl_log(range(1, 6)),
        ray_status="STOPPED",
        failure_kind=FailureKind.STALLED,
        resume_known=True,
        start_time=now - started_ago - timedelta(hours=1),
        end_time=now - started_ago - timedelta(minutes=1),
    )
    run_attempt(
        task,
        log=verl_log(range(4, 8), resumed_from=3),
        resumed_from_step=3,
        resume_known=True,
        start_time=now - started_ago,
    )
    return task
