"""A node that dies under a task, with a fake Ray and time moved by hand: Ray's own account
decides NODE_FAILURE (its error_type, its node-died exceptions, a node it lists dead), the task
goes back to the queue in its place without spending max_retries, ARGUS_NODE_FAILURE_RETRIES
bounds it, and the dead node leaves the plan at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.queue.request import Request
from tasks.scheduler.admission import Running, decide
from tasks.scheduler.failures import classify, node_death
from tasks.scheduler.launch import live_holdings, promised_gpus
from tasks.scheduler.plan import Profile, Release
from tasks.scheduler.rooms import Room
from tasks.scheduler.tick import tick
from tests.tasks.scheduler.test_watch import log, running

pytestmark = pytest.mark.django_db
S = TaskState

# What Ray 2.60's job manager writes when a job's supervisor actor dies with its node
# (ray/dashboard/modules/job/job_manager.py: "Job supervisor actor died: {e}").
SUPERVISOR_DIED = (
    "Job supervisor actor died: The actor died because its node has died. Node Id: "
    "5f3c1a9be0d84c2f8e1b7a6d5c4b3a2918f7e6d5c4b3a29180f7e6d5\n"
    "\tthe actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats"
)
# verl's TaskRunner when one of its WorkerDict actors went with its node, as Hydra prints it.
ACTOR_NODE_DIED = """\
Error executing job with overrides: ['trainer.nnodes=2']
Traceback (most recent call last):
  File "/opt/verl/verl/trainer/main_ppo.py", line 42, in main
    run_ppo(config)
ray.exceptions.RayTaskError(ActorDiedError): \x1b[36mray::TaskRunner.run()\x1b[39m (pid=8812, ip=10.0.0.2)
ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
\tclass_name: WorkerDict
\tactor_id: 9a1b2c3d
\tip: 10.0.0.3
The actor died because its node has died. Node Id: 77aa55cc33ee11ff77aa55cc33ee11ff77aa55cc33ee11ff77aa55cc
\tthe actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats

Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""
# The same exception from a crash (the actor's process called os._exit: no node died).
ACTOR_CRASHED = """\
ray.exceptions.RayTaskError(ActorDiedError): \x1b[36mray::TaskRunner.run()\x1b[39m (pid=8812)
ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
\tclass_name: TaskRunner
\tthe actor's worker process exited with code 1: os._exit(1)
"""


def test_ray_error_type_decides_a_supervisor_death():
    death = node_death("JOB_SUPERVISOR_ACTOR_DIED", SUPERVISOR_DIED, "", {})
    assert death is not None and death.nodes == ("5f3c1a9b",)
    assert death.line.startswith("its Ray job supervisor died (5f3c1a9b)")


def test_an_actor_lost_with_its_node_is_a_node_death_and_a_crash_is_not():
    death = node_death("JOB_ENTRYPOINT_COMMAND_ERROR", "", ACTOR_NODE_DIED, {})
    assert death is not None and death.nodes == ("77aa55cc",)
    assert death.line.startswith("node 77aa55cc died: ray.exceptions.ActorDiedError")
    assert node_death("JOB_ENTRYPOINT_COMMAND_ERROR", "", ACTOR_CRASHED, {}) is None


def test_a_dead_node_of_the_attempt_names_the_end_unless_the_user_erred():
    nccl = "RuntimeError: NCCL communicator was aborted on rank 3\n"
    death = node_death("JOB_ENTRYPOINT_COMMAND_ERROR", "", nccl, {"abcdef0123456789": "10.0.0.3"})
    assert death is not None and death.nodes == ("10.0.0.3 (abcdef01)",)
    user = "FileNotFoundError: [Errno 2] No such file or directory: '/data/train.parquet'\n"
    assert node_death("JOB_ENTRYPOINT_COMMAND_ERROR", "", user, {"abcdef0123456789": "10.0.0.3"}) is None
    assert node_death("JOB_ENTRYPOINT_COMMAND_ERROR", "", nccl, {}) is None


def failed_with_node(ray, task, attempt, **fields):
    ray.set_status(attempt.ray_submission_id, "FAILED", **fields)
    tick()
    task.refresh_from_db()
    attempt.refresh_from_db()


def test_a_task_whose_driver_node_died_goes_back_in_its_place_without_spending_max_retries(
    alice, make_task, fake_ray, clock
):
    ray = fake_ray([4, 4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    driver_node = attempt.placement and next(iter(attempt.placement))
    ray.kill_node(driver_node)
    failed_with_node(
        ray,
        task,
        attempt,
        error_type="JOB_SUPERVISOR_ACTOR_DIED",
        message=SUPERVISOR_DIED,
        driver_node_id=driver_node,
    )
    assert attempt.failure_kind == FailureKind.NODE_FAILURE
    back = task.events.get(kind=EventKind.RETRY_SCHEDULED)
    assert (back.from_state, back.to_state) == (S.RUNNING, S.QUEUED)
    assert back.data["failure_kind"] == FailureKind.NODE_FAILURE
    assert "10.0.0.1 (n" in back.message or "5f3c1a9b" in back.message
    # The same tick admitted it again, on the node that is left.
    assert task.state == S.SUBMITTED
    second = task.attempts.get(attempt_no=2)
    assert driver_node not in second.placement


def test_node_deaths_are_bounded_and_the_summary_names_the_nodes(alice, make_task, fake_ray, clock, settings):
    settings.ARGUS_NODE_FAILURE_RETRIES = 2
    ray = fake_ray([4, 4, 4, 4])
    task = make_task(alice, max_retries=5, stall_timeout_s=None)
    killed = []
    for number in (1, 2, 3):
        attempt = running(ray, task, clock) if number == 1 else _start_again(ray, task, clock)
        node = next(iter(attempt.placement))
        assert node not in killed  # the dead ones are out of the plan
        killed.append(node)
        ray.kill_node(node)
        failed_with_node(ray, task, attempt, error_type="JOB_ENTRYPOINT_COMMAND_ERROR", message="exit 1")
        assert attempt.failure_kind == FailureKind.NODE_FAILURE
    assert task.state == S.FAILED
    assert task.error_summary.startswith("Nodes died under 3 of its attempts (")
    for node in killed:
        assert f"10.0.0.1 ({node})" in task.error_summary
    assert "giving up after ARGUS_NODE_FAILURE_RETRIES (2)" in task.error_summary


def _start_again(ray, task, clock) -> Attempt:
    task.refresh_from_db()
    if task.state in (S.QUEUED, S.PENDING_RESOURCES):
        tick()
    attempt = task.attempts.order_by("-attempt_no").first()
    assert attempt is not None
    ray.set_status(attempt.ray_submission_id, "RUNNING")
    tick()
    attempt.refresh_from_db()
    return attempt


def test_an_actor_crash_with_no_node_dead_is_still_a_runtime_error(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, ACTOR_CRASHED)
    failed_with_node(ray, task, attempt, error_type="JOB_ENTRYPOINT_COMMAND_ERROR", message="exit 1")
    assert attempt.failure_kind == FailureKind.RUNTIME_ERROR
    assert task.state == S.FAILED


def test_a_training_actor_lost_with_its_node_counts_the_node_ray_placed_it_on(alice, make_task, fake_ray, clock):
    """Admission promised n0, Ray placed the groups on n1: the death of n1 is the task's."""
    ray = fake_ray([4, 4, 4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    promised = next(iter(attempt.placement))
    elsewhere = next(node.node_id for node in ray.nodes if node.node_id != promised)
    ray.set_status(attempt.ray_submission_id, "RUNNING", job_id="03000000")
    ray.placed = {"03000000": {elsewhere: 4}}
    tick()
    attempt.refresh_from_db()
    assert attempt.nodes == {elsewhere: 4}
    assert promised_gpus(live_holdings()) == {elsewhere: 4}  # planning follows where Ray put it, not the promise
    ray.kill_node(elsewhere)
    failed_with_node(
        ray, task, attempt, error_type="JOB_ENTRYPOINT_COMMAND_ERROR", message="RuntimeError: NCCL timeout"
    )
    assert attempt.failure_kind == FailureKind.NODE_FAILURE


def test_the_dead_node_leaves_the_plan_at_once():
    """A running task on a node that died: its room never "comes back" there, not in a
    reservation, a backfill or an estimate."""
    totals = {"n1": Room(4, 12)}  # n0 died: Ray lists only n1 alive
    free = {"n1": Room(0, 0)}
    on_dead = Running(1, {"n0": 4}, 12.0, ends_at=100.0, user="alice")
    on_live = Running(2, {"n1": 4}, 12.0, ends_at=500.0, user="alice")
    profile = Profile(0.0, free, [Release(100.0, {"n0": 4}, 12.0), Release(500.0, {"n1": 4}, 12.0)], totals)
    assert "n0" not in profile.room_at(200.0)
    request = Request(3, 1, 4, 12.0, "bob", 60.0)
    assert profile.earliest(request, 60.0) == (500.0, {"n1": 4})
    decision = decide([request], free, totals, policy="backfill", now=0.0, running=[on_dead, on_live], estimate=5)
    assert decision.estimates[3] == 500.0
    assert decision.reservations[3] == (500.0, {"n1": 4})


def test_the_api_and_the_task_page_show_where_ray_placed_it(alice, make_task, fake_ray, clock, client_for):
    ray = fake_ray([4, 4])
    ray.nodes[1].ip = "10.0.0.2"
    task = make_task(alice, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    ray.set_status(attempt.ray_submission_id, "RUNNING", job_id="05000000", driver_node_id="n0")
    ray.placed = {"05000000": {"n1": 4}}
    tick()
    tick()
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}").json()
    assert body["attempts"][0]["nodes"] == [
        {"node_id": "n1", "ip": "10.0.0.2", "gpus": 4, "driver": False},
        {"node_id": "n0", "ip": "10.0.0.1", "gpus": 0, "driver": True},
    ]
    assert body["attempts"][0]["node_ip"] == "10.0.0.1"
    web = client_for(None)
    web.force_login(alice)
    page = web.get(f"/tasks/{task.task_id}/").content.decode()
    assert 'title="n1">10.0.0.2 ×4</code>' in page
    assert "(its driver ran here)" in page


NODE_DIED_LOG = (Path(__file__).resolve().parents[2] / "standin" / "logs" / "node_died.log").read_text()


def ended_with_log(ray, task, attempt, clock, text: str) -> None:
    """The run wrote ``text``, and Ray reports its job FAILED now (the driver exited non-zero)."""
    log(task, attempt, text)
    ended = int(clock.now.timestamp() * 1000)
    ray.set_status(attempt.ray_submission_id, "FAILED", error_type="JOB_ENTRYPOINT_COMMAND_ERROR", end_time=ended)


def test_a_peer_lost_before_ray_names_the_dead_node_waits_for_ray(alice, make_task, fake_ray, clock, settings):
    """The stand-in's real log of a node killed under its training actor: the caller hears
    "Connection refused" (ActorUnavailableError) seconds before Ray's health checks declare the
    node dead. The verdict waits for Ray, up to ARGUS_NODE_DEATH_WAIT_S."""
    settings.ARGUS_NODE_DEATH_WAIT_S = 45
    ray = fake_ray([4, 4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    ended_with_log(ray, task, attempt, clock, NODE_DIED_LOG)
    tick()
    attempt.refresh_from_db()
    assert attempt.end_time is None  # not judged yet
    clock.advance(10)
    ray.kill_node(next(iter(attempt.placement)))  # Ray declares it dead
    tick()
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.NODE_FAILURE


def test_a_lost_peer_with_no_node_dead_is_the_runs_own_failure_after_the_wait(
    alice, make_task, fake_ray, clock, settings
):
    settings.ARGUS_NODE_DEATH_WAIT_S = 45
    ray = fake_ray([4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    ended_with_log(ray, task, attempt, clock, NODE_DIED_LOG)
    clock.advance(44)
    tick()
    assert Attempt.objects.get(pk=attempt.pk).end_time is None
    clock.advance(2)
    tick()
    attempt.refresh_from_db()
    task.refresh_from_db()
    assert attempt.failure_kind == FailureKind.RUNTIME_ERROR
    assert task.state == S.FAILED


def test_a_failed_job_awaiting_its_verdict_holds_no_room(alice, bob, make_task, fake_ray, clock, settings):
    """Found by the chaos run: while a failed job's verdict waits for Ray to name a dead node, Ray
    gives its room to the next job; the attempt must not count it too (6 GPUs on a 4-GPU node)."""
    settings.ARGUS_NODE_DEATH_WAIT_S = 45
    ray = fake_ray([4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, NODE_DIED_LOG)
    ray.set_status(attempt.ray_submission_id, "FAILED", end_time=int(clock.now.timestamp() * 1000))
    waiting = make_task(bob, stall_timeout_s=None)
    tick()
    assert Attempt.objects.get(pk=attempt.pk).end_time is None  # the verdict waits
    waiting.refresh_from_db()
    assert waiting.state == S.SUBMITTED  # the room went to the next task at once
    assert promised_gpus(live_holdings()) == {"n0": 4}  # the next task's alone, not 8 on a 4-GPU node


def test_a_placement_ray_chose_elsewhere_frees_no_room_before_everything_is_placed(alice, make_task, fake_ray, clock):
    """Found on real Ray (four 4-GPU tasks on two 4-GPU nodes, three ran at once): admission
    promised A n0 and B n1; Ray put A's groups on n1, and will put B's on n0. Until B is placed,
    A holds its promise too: n0 is not free for a third task."""
    ray = fake_ray([4, 4])
    for node in ray.nodes:
        node.ray_gpus_free, node.ray_cpus_free = 4.0, 14.0
    a = make_task(alice, stall_timeout_s=None)
    b = make_task(alice, stall_timeout_s=None)
    tick()
    first, second = a.attempts.get(), b.attempts.get()
    promised_a = next(iter(first.placement))
    other = next(node.node_id for node in ray.nodes if node.node_id != promised_a)
    assert second.placement == {other: 4}
    ray.set_status(first.ray_submission_id, "RUNNING", job_id="01000000")
    ray.set_status(second.ray_submission_id, "RUNNING", job_id="02000000")
    ray.placed = {"01000000": {other: 4}}  # Ray put A where B was promised
    for node in ray.nodes:  # Ray counts A's groups on `other`; B's are not created yet
        node.ray_gpus_free = 0.0 if node.node_id == other else 4.0
    c = make_task(alice, stall_timeout_s=None)
    tick()
    tick()
    c.refresh_from_db()
    assert c.state == S.PENDING_RESOURCES and not c.attempts.exists()
    ray.placed["02000000"] = {promised_a: 4}  # B's groups land where A was promised
    tick()
    assert promised_gpus(live_holdings()) == {other: 4, promised_a: 4}


def test_a_job_whose_groups_ray_released_holds_no_room(alice, make_task, fake_ray, clock):
    """Found by the chaos run (6 GPUs placed on a 4-GPU node): A's status was read RUNNING, then
    its job died and Ray gave its node to B's groups before the same tick read the placements.
    A no longer holds that room; where it ran stays known, for the verdict on its end."""
    ray = fake_ray([4, 4])
    for node in ray.nodes:
        node.ray_gpus_free, node.ray_cpus_free = 4.0, 14.0
    a = make_task(alice, max_retries=0, stall_timeout_s=None)
    b = make_task(alice, stall_timeout_s=None)
    tick()
    first, second = a.attempts.get(), b.attempts.get()
    ran_on = next(iter(second.placement))  # Ray puts A where B was promised
    ray.set_status(first.ray_submission_id, "RUNNING", job_id="01000000")
    ray.set_status(second.ray_submission_id, "RUNNING", job_id="02000000")
    ray.placed = {"01000000": {ran_on: 4}}
    tick()
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.nodes, first.released) == ({ran_on: 4}, False)
    assert second.awaits_placement and not second.released  # not placed yet is not released

    def a_dies_and_b_takes_its_node() -> None:  # after A's status was read this tick
        ray.placed = {"02000000": {ran_on: 4}}

    ray.hooks["placements"] = a_dies_and_b_takes_its_node
    tick()
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.released and first.nodes == {ran_on: 4} and not first.awaits_placement
    assert second.nodes == {ran_on: 4} and not second.released
    assert promised_gpus(live_holdings()) == {ran_on: 4}  # B's alone, not 8 on a 4-GPU node
    # Ray then says A failed as a node of its actors died: the node Ray had put it on.
    ray.kill_node(ran_on)
    log(a, first, ACTOR_NODE_DIED)
    failed_with_node(ray, a, first, error_type="JOB_ENTRYPOINT_COMMAND_ERROR", message="exit 1")
    assert first.failure_kind == FailureKind.NODE_FAILURE


# --- Only Ray's own account, and only the nodes Ray really used (issue 25, item 5) ----------------

# What Ray 2.60's job manager writes when a job's supervisor could not start in time
# (ray/dashboard/modules/job/job_manager.py, _monitor_job_internal), for a job with entrypoint
# resources, as every Argus job has (worker_node; an export's CPUs).
START_TIMEOUT = (
    "Job supervisor actor failed to start within 900.0 seconds. This timeout can be configured by setting the "
    "environment variable RAY_JOB_START_TIMEOUT_SECONDS. This may be because the job entrypoint's specified "
    "resources (entrypoint_num_cpus, entrypoint_num_gpus, entrypoint_resources, entrypoint_memory)aren't available "
    "on the cluster. Try checking the cluster's available resources with `ray status` and specifying fewer "
    "resources for the job entrypoint."
)
# The user's own program printing words about nodes, then crashing the way an os._exit does: Ray's
# exception says an actor died, and nothing Ray wrote says a node did.
PRINTED_NODE_DEATH = (
    "(TaskRunner pid=8812) watchdog: node 10.0.0.3 died, giving up\n"
    "(TaskRunner pid=8812) The actor died because its node has died. Node Id: 77aa55cc33ee11ff77aa55cc\n"
    "node worker-3 has died\n"
    + ACTOR_CRASHED
    + "\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
)
# A bare exception name printed at the start of a line is no exception of Ray's.
PRINTED_RAY_WORDS = (
    "ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "The actor died because its node has died. Node Id: 77aa55cc33ee11ff77aa55cc\n"
)


def test_an_export_that_waited_for_cpus_past_rays_start_timeout_waits_for_room(
    alice, make_task, fake_ray, clock, settings
):
    """Ray fails a job still PENDING after its start timeout: no node could take its driver. Not a
    node's death (nothing died) and not the task's failure (nothing of it ran): a shortage, so
    it waits for room with a backoff, its max_retries untouched."""
    assert node_death("JOB_SUPERVISOR_ACTOR_START_TIMEOUT", START_TIMEOUT, "", {}) is None
    assert classify(START_TIMEOUT, "", "JOB_SUPERVISOR_ACTOR_START_TIMEOUT") == FailureKind.INSUFFICIENT_RESOURCES
    settings.ARGUS_RETRY_INTERVAL_S = 60
    step = alice_home(alice) / "jobs" / "alice-sft-1" / "checkpoints" / "global_step_2"
    step.mkdir(parents=True)
    ray = fake_ray([4])
    task = make_task(alice, f"workload: export\ncheckpoint: {step}\nmax_retries: 0\n", stall_timeout_s=None)
    tick()
    attempt = task.attempts.get()
    assert attempt.gpus == 0  # an export: its driver asks CPUs only
    ray.set_status(
        attempt.ray_submission_id, "FAILED", error_type="JOB_SUPERVISOR_ACTOR_START_TIMEOUT", message=START_TIMEOUT
    )
    tick()
    task.refresh_from_db()
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.INSUFFICIENT_RESOURCES
    assert task.state == S.PENDING_RESOURCES
    assert task.pending_reason.startswith("the cluster had no room (Job supervisor actor failed to start within")
    back = task.events.get(kind=EventKind.RETRY_SCHEDULED)
    assert back.data["retry_in_s"] == 60
    assert "dead_nodes" not in back.data


def alice_home(user) -> Path:
    from accounts.homes import home_dir

    return home_dir(user.username)


def test_a_supervisor_that_died_with_no_node_dead_is_no_node_failure(alice, make_task, fake_ray, clock):
    """The supervisor actor can die of other things than its node (Ray's memory monitor; the
    user's driver signalling its parent): Ray's message says which, and so does its node table."""
    killed = (
        "Job supervisor actor died: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: JobSupervisor\n\tactor_id: 3f2e1d0c\n\tpid: 4242\n"
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
        "detail: Worker unexpectedly exits with a connection error code 2. End of file."
    )
    assert node_death("JOB_SUPERVISOR_ACTOR_DIED", killed, "", {}) is None
    ray = fake_ray([4, 4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    driver = next(iter(attempt.placement))
    failed_with_node(ray, task, attempt, error_type="JOB_SUPERVISOR_ACTOR_DIED", message=killed, driver_node_id=driver)
    assert attempt.failure_kind == FailureKind.UNKNOWN
    assert task.state == S.FAILED
    # The same death with the driver's node dead in Ray's node table is the node's.
    other = make_task(alice, max_retries=0, stall_timeout_s=None)
    second = running(ray, other, clock)
    ray.kill_node(next(iter(second.placement)))
    failed_with_node(
        ray,
        other,
        second,
        error_type="JOB_SUPERVISOR_ACTOR_DIED",
        message=killed,
        driver_node_id=next(iter(second.placement)),
    )
    assert second.failure_kind == FailureKind.NODE_FAILURE


@pytest.mark.parametrize(
    ("tail", "waits"),
    [(PRINTED_NODE_DEATH, True), (PRINTED_RAY_WORDS, False)],
    ids=["os-exit", "bare-name"],
)
def test_words_the_program_printed_are_not_rays(alice, make_task, fake_ray, clock, settings, tail, waits):
    """Its own crash, whatever it printed of nodes. Only Ray's own lost-work exception (the
    os._exit's ActorDiedError) makes the verdict wait for Ray's node table; it names none dead."""
    assert node_death("JOB_ENTRYPOINT_COMMAND_ERROR", "", tail, {}) is None
    settings.ARGUS_NODE_DEATH_WAIT_S = 45
    ray = fake_ray([4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    ended_with_log(ray, task, attempt, clock, tail)
    tick()
    assert (Attempt.objects.get(pk=attempt.pk).end_time is None) is waits
    clock.advance(46)
    tick()
    attempt.refresh_from_db()
    task.refresh_from_db()
    assert attempt.failure_kind == FailureKind.RUNTIME_ERROR
    assert task.state == S.FAILED


def test_a_planned_node_that_dies_after_ray_placed_the_job_elsewhere_is_not_its_death(
    alice, make_task, fake_ray, clock
):
    """Admission planned n0; Ray placed the groups on n1 and the driver there too. n0 dies (under
    another job): this job's crash is its own, not a free retry."""
    ray = fake_ray([4, 4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    planned = next(iter(attempt.placement))
    placed = next(node.node_id for node in ray.nodes if node.node_id != planned)
    ray.set_status(attempt.ray_submission_id, "RUNNING", job_id="07000000", driver_node_id=placed)
    ray.placed = {"07000000": {placed: 4}}
    tick()
    attempt.refresh_from_db()
    assert attempt.nodes == {placed: 4} and attempt.placement == {planned: 4}
    ray.kill_node(planned)
    failed_with_node(
        ray, task, attempt, error_type="JOB_ENTRYPOINT_COMMAND_ERROR", message="RuntimeError: NCCL timeout"
    )
    assert attempt.failure_kind == FailureKind.RUNTIME_ERROR
    assert task.state == S.FAILED


def test_while_nothing_of_rays_placement_is_known_the_planned_nodes_stand(alice, make_task, fake_ray, clock):
    ray = fake_ray([4, 4])
    task = make_task(alice, max_retries=0, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    assert attempt.nodes == {} and attempt.node_id == ""
    ray.kill_node(next(iter(attempt.placement)))
    failed_with_node(
        ray, task, attempt, error_type="JOB_ENTRYPOINT_COMMAND_ERROR", message="RuntimeError: NCCL timeout"
    )
    assert attempt.failure_kind == FailureKind.NODE_FAILURE
