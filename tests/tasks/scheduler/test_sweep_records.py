"""The sweep on records Ray writes back by itself.

Ray's job monitor polls a job's supervisor actor once a second. When Argus deletes a finished job
before the monitor has seen that actor exit, the monitor finds no record and writes a new one:
FAILED, entrypoint "Entrypoint not found.", no metadata (ray/dashboard/modules/job/common.py,
``put_status``). Seen on a real cluster with ARGUS_RAY_JOB_RETENTION_S=0."""

from __future__ import annotations

import pytest
from ray.dashboard.modules.job.pydantic_models import JobDetails, JobType
from ray.job_submission import JobStatus

from tasks.attempts import Attempt
from tasks.choices import TaskState
from tasks.jobfiles import attempt_log
from tasks.scheduler.tick import tick

pytestmark = pytest.mark.django_db


def written_back(submission_id: str) -> JobDetails:
    return JobDetails(
        type=JobType.SUBMISSION,
        entrypoint="Entrypoint not found.",
        submission_id=submission_id,
        status=JobStatus.FAILED,
        message="Job supervisor actor died",
        metadata=None,
    )


def test_a_record_ray_wrote_back_after_a_deletion_is_deleted_again(alice, make_task, fake_ray, settings):
    settings.ARGUS_RAY_JOB_RETENTION_S = 0
    ray = fake_ray([4])
    task = make_task(alice)
    tick()
    attempt = task.attempts.get()
    sid = attempt.ray_submission_id
    ray.set_status(sid, "SUCCEEDED")
    attempt_log(task, attempt).parent.mkdir(parents=True, exist_ok=True)
    attempt_log(task, attempt).write_text("step:1 - loss:1.0\n")
    tick(force_sweep=True)
    task.refresh_from_db()
    assert task.state == TaskState.SUCCEEDED
    assert ray.deleted == [sid]

    ray.known[sid] = written_back(sid)  # the monitor's late write
    # A job of someone else's named the same way, for which Argus has no attempt: not ours.
    ray.known["notebook--a01"] = written_back("notebook--a01")
    tick(force_sweep=True)
    assert ray.deleted == [sid, sid]
    assert "notebook--a01" in ray.known
    task.refresh_from_db()
    assert task.state == TaskState.SUCCEEDED  # the record Ray made up changes nothing of the task's


def test_the_sweep_knows_argus_names_by_their_shape():
    assert Attempt.names_an_attempt(Attempt.submission_id_for("alice-ppo-20261124-112206-709a", 3))
    assert Attempt.names_an_attempt("alice-ppo-20261124-112206-709a--a120")
    assert not Attempt.names_an_attempt("raysubmit_3RqfPKxgHN8bWuXW")
    assert not Attempt.names_an_attempt("alice--a1")  # two digits at least, as submission_id_for writes
