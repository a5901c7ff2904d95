"""after / after_any on plain tasks, with a fake Ray: a WAITING task is held out of everything
the queue takes part in, queued the tick its dependencies are met, canceled (unrun) when an
`after` one fails; and who may depend on what."""

from __future__ import annotations

import pytest
import yaml

from accounts.models import UserLimits
from tasks.choices import EventKind, TaskState
from tasks.models import Event, Task, TaskDependency
from tasks.scheduler.tick import tick
from tests.accounts.helpers import assert_error
from tests.conftest import PPO_SPEC, grant_high_priority
from tests.tasks.scheduler.test_watch import running

pytestmark = pytest.mark.django_db
S = TaskState


def after(*tasks: Task, key: str = "after", spec: str = PPO_SPEC) -> str:
    return spec + yaml.safe_dump({key: [task.task_id for task in tasks]})


def end(ray, task: Task, status: str = "SUCCEEDED") -> None:
    attempt = task.attempts.get()
    ray.set_status(attempt.ray_submission_id, status, driver_exit_code=0 if status == "SUCCEEDED" else 1)


def test_a_task_after_another_waits_then_is_queued_the_tick_its_dependency_succeeds(alice, make_task, fake_ray, clock):
    ray = fake_ray([4, 4])
    first = make_task(alice)
    second = make_task(alice, after(first))
    assert second.state == S.WAITING and second.queued_at is None
    assert list(TaskDependency.objects.values_list("task", "depends_on", "any_end")) == [(second.pk, first.pk, False)]
    tick()  # first starts; second waits though a node is free: it is not in the queue
    second.refresh_from_db()
    assert ray.submitted == [f"{first.task_id}--a01"]
    assert (second.state, second.pending_reason) == (S.WAITING, f"waits for {first.task_id}, QUEUED")
    tick()  # the reason follows its dependency's state
    second.refresh_from_db()
    assert (second.state, second.pending_reason) == (S.WAITING, f"waits for {first.task_id}, SUBMITTED")
    clock.advance(60)
    end(ray, first)
    tick()  # sync sees first succeed; second is queued and admitted in the same tick
    second.refresh_from_db()
    assert second.state == S.SUBMITTED
    assert second.queued_at == clock.now  # its wait counts from here, not from its creation
    moves = list(second.events.filter(kind=EventKind.STATE_TRANSITION).values_list("from_state", "to_state"))
    assert moves[:2] == [(S.WAITING, S.QUEUED), (S.QUEUED, S.SUBMITTING)]


def test_an_after_dependency_that_fails_cancels_the_task_unrun(alice, make_task, fake_ray):
    ray = fake_ray([4])
    first = make_task(alice)
    second = make_task(alice, after(first))
    third = make_task(alice, after(second))
    tick()
    end(ray, first, "FAILED")
    tick()
    second.refresh_from_db()
    assert second.state == S.CANCELED
    assert second.error_summary == f"its dependency {first.task_id} FAILED"
    assert not second.attempts.exists()
    event = second.events.get(kind=EventKind.DEPENDENCY_FAILED)
    assert (event.from_state, event.to_state) == (S.WAITING, S.CANCELED)
    # Down the chain, the same tick: its own dependency is CANCELED now.
    tick()
    third.refresh_from_db()
    assert (third.state, third.error_summary) == (S.CANCELED, f"its dependency {second.task_id} CANCELED")
    assert ray.submitted == [f"{first.task_id}--a01"]


def test_after_any_starts_however_its_dependency_ended(alice, make_task, fake_ray):
    ray = fake_ray([4])
    first = make_task(alice)
    evaluation = make_task(alice, after(first, key="after_any"))
    tick()
    end(ray, first, "FAILED")
    tick()
    evaluation.refresh_from_db()
    assert evaluation.state == S.SUBMITTED


def test_a_waiting_task_is_never_admitted_reserved_or_preempted_for(alice, bob, make_task, fake_ray, clock, settings):
    settings.ARGUS_PREEMPTION = True
    ray = fake_ray([4])
    victim = make_task(alice, PPO_SPEC + "preemptible: true\n", stall_timeout_s=None)
    attempt = running(ray, victim, clock)
    grant_high_priority(bob)
    gate = make_task(bob)
    held = make_task(bob, after(gate) + "priority: high\n")
    clock.advance(60)
    tick()
    held.refresh_from_db()
    attempt.refresh_from_db()
    # bob's high task would preempt alice's were it in the queue: WAITING, it is not.
    assert held.state == S.WAITING and held.estimated_start_at is None
    assert attempt.preempted_at is None and attempt.preempted_for is None
    assert ray.submitted == [f"{victim.task_id}--a01"]
    # Its dependency queued in its place is a normal task: it waits, with a plan, and preempts nobody.
    gate.refresh_from_db()
    assert gate.state == S.PENDING_RESOURCES


def test_waiting_counts_toward_max_queued_tasks_but_not_running_limits(alice, client_for, make_task, fake_ray):
    ray = fake_ray([4, 4])
    UserLimits.objects.create(user=alice, max_queued_tasks=2, max_running_tasks=1)
    first = make_task(alice)
    make_task(alice, after(first))
    response = client_for(alice).post("/api/v2/tasks", PPO_SPEC, content_type="application/yaml")
    assert_error(response, 429, "alice has 2 tasks waiting; max_queued_tasks is 2")
    tick()  # first starts; the WAITING one does not count as running for max_running_tasks
    assert ray.submitted == [f"{first.task_id}--a01"]
    assert response.status_code == 429


def test_canceling_a_waiting_task_cancels_it_at_once(alice, client_for, make_task):
    first = make_task(alice)
    second = make_task(alice, after(first))
    assert second.can_cancel
    response = client_for(alice).post(f"/api/v2/tasks/{second.task_id}/cancel")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == S.CANCELED
    assert Event.objects.filter(task=second, from_state=S.WAITING, to_state=S.CANCELED, actor="api:alice").exists()


def test_the_api_names_an_unknown_or_foreign_dependency(alice, bob, admin, client_for, make_task):
    bobs = make_task(bob)
    response = client_for(alice).post(
        "/api/v2/tasks", after(bobs) + "after_any: [nobody-ppo-1]\n", content_type="application/yaml"
    )
    error = assert_error(response, 400, fields=("after", "after_any"))
    assert error["fields"]["after"] == [f"no task of yours is called {bobs.task_id!r}"]
    assert error["fields"]["after_any"] == ["no task of yours is called 'nobody-ppo-1'"]
    assert not Task.objects.filter(user=alice).exists()
    # An admin may make a task of their own wait for anyone's.
    response = client_for(admin).post("/api/v2/tasks", after(bobs), content_type="application/yaml")
    assert response.status_code == 201, response.content
    assert response.json()["state"] == S.WAITING


def test_a_requeued_task_with_dependencies_waits_for_them_again(alice, make_task, fake_ray):
    ray = fake_ray([4])
    first = make_task(alice)
    second = make_task(alice, after(first))
    tick()
    end(ray, first, "FAILED")
    tick()
    second.refresh_from_db()
    assert second.state == S.CANCELED
    second.requeue(actor="admin:root")
    assert second.state == S.WAITING
    tick()  # first is still FAILED: canceled again, never admitted
    second.refresh_from_db()
    assert second.state == S.CANCELED and not second.attempts.exists()


def test_a_waiting_task_with_no_dependency_left_is_queued_beside_one_that_still_waits(alice, make_task, fake_ray):
    fake_ray([1])  # room for nothing made here: what is queued stays queued
    first = make_task(alice)
    held = make_task(alice, after(first))
    orphan = make_task(alice, after(first))
    TaskDependency.objects.filter(task=orphan).delete()  # none should be left so; nothing holds it
    tick()
    held.refresh_from_db()
    orphan.refresh_from_db()
    assert (held.state, held.pending_reason) == (S.WAITING, f"waits for {first.task_id}, QUEUED")
    assert orphan.state in (S.QUEUED, S.PENDING_RESOURCES) and orphan.queued_at is not None
