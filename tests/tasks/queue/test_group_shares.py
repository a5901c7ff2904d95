"""Fair share across groups as the scheduler and the queue read it (tasks.queue.shares, order):
memberships and group weights from the database, one query for all of them."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.groups.models import Membership, QuotaGroup
from accounts.models import UserLimits
from tasks.choices import TaskState
from tasks.models import Task, Usage
from tasks.queue.fairshare import Waiting, factors, order
from tasks.queue.order import order_waiting
from tasks.queue.read import current_queue
from tasks.queue.shares import read_groups, shares
from tasks.scheduler.tick import tick

pytestmark = pytest.mark.django_db

MakeTask = Callable[..., Task]
HOUR = 3600.0
WINDOW = 2 * HOUR


@pytest.fixture(autouse=True)
def fair_share(settings) -> None:
    settings.ARGUS_FAIR_SHARE_WINDOW_S = WINDOW
    settings.ARGUS_FAIR_SHARE_HALF_LIFE_S = 168 * HOUR


@pytest.fixture
def users(make_user) -> dict[str, User]:
    return {name: make_user(name) for name in ("ann", "bob", "cat", "dan")}


def used(user: User, gpu_hours: float) -> None:
    Usage.objects.create(user=user, gpu_seconds=gpu_hours * HOUR, as_of=timezone.now())


def join(user: User, group: str, weight: float = 1.0) -> None:
    found, _ = QuotaGroup.objects.get_or_create(name=group, defaults={"fair_share_weight": weight})
    Membership.objects.create(user=user, group=found)


def waiting_order(now, tasks: list[tuple[int, User, float]]) -> list[int]:
    """The scheduler's order (launch.admit's order_waiting) of (key, user, minutes ago)."""
    items = [Waiting(key, user.username, 0, now.timestamp() - minutes * 60) for key, user, minutes in tasks]
    ordered, _ = order_waiting(items, {user.pk: user.username for _, user, _ in tasks}, now)
    return [item.key for item in ordered]


def test_a_light_groups_task_passes_a_heavy_groups_in_the_schedulers_order(users: dict[str, User]) -> None:
    ann, bob, cat, dan = users.values()
    used(ann, 30.0)
    used(dan, 1.0)  # dan: the lightest user with usage, in the heavier group
    used(bob, 20.0)
    join(ann, "vision")
    join(dan, "vision")
    join(bob, "nlp")
    now = timezone.now()
    tasks = [(1, dan, 30.0), (2, bob, 10.0), (3, cat, 20.0)]
    # vision 31 GPU-hours against nlp's 20 and cat's group "" (none) of 0: cat, then bob, then dan.
    assert waiting_order(now, tasks) == [3, 2, 1]
    # As users alone, dan (1 h) would go before bob (20 h).
    assert (
        factors({"dan": 1.0, "bob": 20.0}, {}, ["dan", "bob", "cat"])["dan"]
        > factors({"dan": 1.0, "bob": 20.0}, {}, ["dan", "bob", "cat"])["bob"]
    )
    # Beyond the window, dan's task keeps its place: no task starves.
    assert waiting_order(now, [(1, dan, 200.0), (2, bob, 10.0)]) == [1, 2]


def test_a_groups_weight_counts(users: dict[str, User]) -> None:
    ann, bob, _, _ = users.values()
    used(ann, 30.0)
    used(bob, 20.0)
    join(ann, "vision", weight=2.0)  # 30 / 2 = 15 against nlp's 20: vision is the lighter
    join(bob, "nlp")
    now = timezone.now()
    assert waiting_order(now, [(1, bob, 30.0), (2, ann, 10.0)]) == [2, 1]
    QuotaGroup.objects.filter(name="vision").update(fair_share_weight=1.0)
    assert waiting_order(now, [(1, bob, 30.0), (2, ann, 10.0)]) == [1, 2]


def test_within_a_group_users_are_ordered_by_their_own_usage(users: dict[str, User]) -> None:
    ann, bob, cat, _ = users.values()
    used(ann, 30.0)
    used(bob, 5.0)
    used(cat, 50.0)
    for user in (ann, bob):
        join(user, "vision")
    UserLimits.objects.create(user=ann, fair_share_weight=10.0)  # 30 of 35 with 10 of 11: lighter than bob
    share = shares(timezone.now(), {})
    assert share["ann"].factor > share["bob"].factor > share["cat"].factor
    # Within vision, as today's factor among its two members.
    within = factors({"ann": 30.0, "bob": 5.0}, {"ann": 10.0}, ["ann", "bob"])
    assert share["ann"].factor == pytest.approx((1 + within["ann"]) / 2)
    assert share["bob"].factor == pytest.approx((1 + within["bob"]) / 2)


def test_no_groups_give_todays_factors_and_order(users: dict[str, User]) -> None:
    ann, bob, cat, dan = users.values()
    used(ann, 30.0)
    used(bob, 20.0)
    UserLimits.objects.create(user=bob, fair_share_weight=3.0)
    now = timezone.now()
    share = shares(now, {cat.pk: "cat", dan.pk: "dan"})
    usage = {name: s.gpu_hours * HOUR for name, s in share.items() if s.gpu_hours}
    today = factors(usage, {"bob": 3.0}, ["cat", "dan", "ann", "bob"])
    assert {name: s.factor for name, s in share.items()} == pytest.approx(today, rel=1e-12)
    # Everyone is in the one group "", which used all there is with all the weight: 1/2.
    assert {(s.group, s.group_weight, s.group_factor) for s in share.values()} == {("", 1.0, 0.5)}
    assert share["ann"].group_gpu_hours == pytest.approx(50.0)
    tasks = [(1, ann, 60.0), (2, bob, 50.0), (3, cat, 40.0), (4, ann, 5.0), (5, dan, 1.0)]
    items = [Waiting(key, user.username, 0, now.timestamp() - minutes * 60) for key, user, minutes in tasks]
    assert waiting_order(now, tasks) == [w.key for w in order(items, today, WINDOW)]


def test_groups_are_read_in_one_query_whatever_their_number(users: dict[str, User], make_user) -> None:
    ann, bob, cat, dan = users.values()
    join(ann, "vision")
    QuotaGroup.objects.create(name="empty", fair_share_weight=5.0)
    with CaptureQueriesContext(connection) as one:
        groups = read_groups()
    assert groups.of == {ann.pk: "vision"}
    assert groups.weight == {"vision": 1.0, "empty": 5.0}
    for n, user in enumerate((bob, cat, dan, make_user("eve"))):
        join(user, f"g{n}")
    with CaptureQueriesContext(connection) as more:
        assert len(read_groups().of) == 5
    assert len(one) == len(more) == 1

    def read_shares() -> int:
        with CaptureQueriesContext(connection) as queries:
            shares(timezone.now(), {user.pk: user.username for user in users.values()})
        return len(queries)

    few = read_shares()
    for user in users.values():
        used(user, 1.0)
    assert read_shares() == few
    # Read already (as the tick may): not read again.
    with CaptureQueriesContext(connection) as given:
        shares(timezone.now(), {ann.pk: "ann"}, groups=groups)
    assert len(given) == few - 1


def test_the_share_of_a_user_with_a_task_on_ray_only_is_the_top_of_its_groups_band(
    users: dict[str, User], make_task: MakeTask
) -> None:
    ann, bob, cat, dan = users.values()
    used(ann, 30.0)
    used(bob, 5.0)
    join(ann, "vision")
    join(cat, "vision")  # cat: a task on Ray, nothing charged yet
    join(bob, "nlp")
    make_task(ann)
    make_task(bob)
    make_task(cat, state=TaskState.RUNNING)
    make_task(dan, state=TaskState.RUNNING)  # in no group, which has no usage: the lightest
    share = current_queue().shares
    # vision (30 h) is the heavier of the two levels: its band is (0, 1/2], nlp's (1/2, 1].
    assert share["cat"].factor == 0.5
    assert share["ann"].factor < 0.5 < share["bob"].factor <= 1.0
    assert (share["dan"].factor, share["dan"].group, share["dan"].group_gpu_hours) == (1.0, "", 0.0)
    assert (share["cat"].group, share["cat"].group_gpu_hours) == ("vision", pytest.approx(30.0))
    # The scheduler's order, where cat is not counted, is unchanged by showing cat.
    assert share["ann"].factor == shares(timezone.now(), {ann.pk: "ann", bob.pk: "bob"})["ann"].factor


def test_the_share_table_shows_the_viewers_groups_part_and_an_admin_every_groups(
    users: dict[str, User], make_user, make_task: MakeTask, client_for
) -> None:
    ann, bob, cat, dan = users.values()
    used(ann, 30.0)
    used(bob, 10.0)
    used(cat, 5.0)
    join(ann, "vision")
    join(bob, "nlp", weight=2.0)
    join(cat, "nlp")
    make_task(dan)  # in no group
    rows = {row["user"]: row for row in client_for(bob).get("/api/v2/queue/shares").json()}
    # nlp (15 h over weight 2) is lighter than vision (30 h) and heavier than "" (0): the middle band.
    assert list(rows) == ["dan", "cat", "bob", "ann"]  # within nlp, cat (5 h) before bob (10 h)
    assert {key: rows["bob"][key] for key in ("group", "group_gpu_hours", "group_weight")} == {
        "group": "nlp",
        "group_gpu_hours": 15.0,
        "group_weight": 2.0,
    }
    assert rows["cat"]["group"] == "nlp" and rows["cat"]["group_share"] == rows["bob"]["group_share"]
    # Another group's part is an admin's to see (as /api/v2/groups), the rest of the row anyone's.
    hidden = {"group": None, "group_gpu_hours": None, "group_weight": None, "group_share": None}
    assert rows["ann"] | hidden == rows["ann"] and rows["dan"] | hidden == rows["dan"]
    assert rows["ann"]["gpu_hours"] == pytest.approx(30.0)
    # Slurm's classic factor among the groups: nlp used 15 of 45 with 2 of 4 of the weight.
    assert rows["bob"]["group_share"] == pytest.approx(2 ** -((15 / 45) / (2 / 4)), abs=1e-3)
    every = {row["user"]: row for row in client_for(make_user("root", admin=True)).get("/api/v2/queue/shares").json()}
    assert [every[name]["group"] for name in ("ann", "bob", "cat", "dan")] == ["vision", "nlp", "nlp", ""]
    assert every["ann"]["group_share"] < every["bob"]["group_share"] < every["dan"]["group_share"] == 1.0
    # dan, in no group, sees the group "" (the users in none) and no other.
    mine = {row["user"]: row["group"] for row in client_for(dan).get("/api/v2/queue/shares").json()}
    assert mine == {"dan": "", "bob": None, "cat": None, "ann": None}


def test_the_queue_page_shows_the_group_column(users: dict[str, User], make_task: MakeTask) -> None:
    ann, bob, _, _ = users.values()
    used(ann, 30.0)
    join(ann, "vision")
    join(bob, "nlp")
    make_task(bob)
    browser = Client()
    browser.force_login(bob)
    page = browser.get("/queue/").content.decode()
    table = page[page.index('<table class="shares">') :]
    assert re.findall(r'<tr data-user="([^"]+)"', table) == ["bob", "ann"]
    assert '<td data-group="nlp">nlp</td><td class="num">1.000</td>' in table
    assert '<td class="muted">another group</td>' in table and 'data-group="vision"' not in table


@pytest.mark.parametrize("grouped", [True, False])
def test_the_tick_starts_the_light_groups_task_first(
    users: dict[str, User], make_task: MakeTask, fake_ray, grouped: bool
) -> None:
    ann, bob, _, dan = users.values()
    used(ann, 5.0)
    used(dan, 40.0)  # nothing queued, but vision's usage
    used(bob, 10.0)
    if grouped:
        join(ann, "vision")
        join(dan, "vision")
        join(bob, "nlp")
    fake_ray([4])  # room for one of the two
    now = timezone.now()
    anns = make_task(ann, created_at=now - timedelta(minutes=30))
    bobs = make_task(bob, created_at=now - timedelta(minutes=10))
    # Groups: vision (45 h) is heavier than nlp (10 h), so bob's later task goes first. Without
    # them ann (5 h) is the lighter user, and her earlier task keeps its place.
    first, second = (bobs, anns) if grouped else (anns, bobs)
    assert tick().submitted == [first.task_id]
    second.refresh_from_db()
    assert second.state in {TaskState.QUEUED, TaskState.PENDING_RESOURCES}


def test_the_queue_note_says_a_lighter_group_passed(users: dict[str, User], make_task: MakeTask, client_for) -> None:
    ann, bob, _, dan = users.values()
    used(ann, 5.0)
    used(dan, 40.0)
    used(bob, 10.0)  # heavier than ann as a user, in the lighter group
    join(ann, "vision")
    join(dan, "vision")
    join(bob, "nlp")
    now = timezone.now()
    make_task(ann, created_at=now - timedelta(minutes=30))
    make_task(bob, created_at=now - timedelta(minutes=10))
    response = client_for(ann).get("/api/v2/queue")
    rows = response.json()["results"]
    assert [row["user"] for row in rows] == [None, "ann"]
    assert rows[1]["note"] == (
        "behind 1 task of bob's; 1 task of a user of a lighter group (bob) goes first (fair share)"
    )
