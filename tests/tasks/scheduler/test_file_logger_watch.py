"""A run whose trainer.logger has no console prints no step line: that its placement came after
Ray's autoscaler said it could not be given is read in verl's file logger instead."""

from __future__ import annotations

import pytest

from tasks.jobfiles import metrics_log
from tasks.scheduler.tick import tick
from tests.tasks.scheduler.test_incomplete import advanced
from tests.tasks.scheduler.test_watch import STUCK, log, running

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("logged", "stopped"), [("", True), ('{"step":0,"data":{"val-core/reward":0.2}}\n', False)])
def test_a_placement_that_came_shows_in_the_file_logger(alice, make_task, fake_ray, clock, settings, logged, stopped):
    settings.ARGUS_PLACEMENT_GRACE_S = 60
    ray = fake_ray([4])
    task = make_task(alice, advanced("trainer.logger=['wandb']"))
    attempt = running(ray, task, clock)
    log(task, attempt, f"{STUCK}\n")
    tick()
    metrics_log(task, attempt).write_text(logged)  # verl made its file logger; maybe logged a step
    clock.advance(61)
    tick()
    assert ray.stopped == ([attempt.ray_submission_id] if stopped else [])
    attempt.refresh_from_db()
    assert (attempt.stuck_since is None) is not stopped
