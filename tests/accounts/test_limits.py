"""Per-user limits and the fair-share weight: how accounts.limits resolves them."""

from __future__ import annotations

import math

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from accounts.bounds import LIMIT_MAX
from accounts.limits import (
    Limits,
    high_priority_refusal,
    limits_by_user,
    limits_for,
    may_use_high_priority,
    queued_limit_error,
    set_limits,
)
from accounts.models import UserLimits

pytestmark = pytest.mark.django_db


@pytest.fixture
def site_limits(settings) -> Limits:
    settings.ARGUS_USER_MAX_RUNNING_GPUS = 16
    settings.ARGUS_USER_MAX_RUNNING_TASKS = 4
    settings.ARGUS_USER_MAX_QUEUED_TASKS = 10
    return Limits(max_running_gpus=16, max_running_tasks=4, max_queued_tasks=10, weight=1.0)


def test_a_user_without_limits_of_their_own_has_the_site_defaults(alice, site_limits):
    assert limits_for(alice) == site_limits


def test_the_shipped_defaults_limit_nothing(alice):
    assert limits_for(alice) == Limits(max_running_gpus=0, max_running_tasks=0, max_queued_tasks=0, weight=1.0)


def test_null_falls_back_to_the_site_default_and_0_means_no_limit(alice, site_limits):
    UserLimits.objects.create(user=alice, max_running_gpus=None, max_running_tasks=0, max_queued_tasks=3)
    assert limits_for(alice) == Limits(max_running_gpus=16, max_running_tasks=0, max_queued_tasks=3, weight=1.0)


def test_the_weight_is_the_users_own(alice):
    UserLimits.objects.create(user=alice, fair_share_weight=2.5)
    assert limits_for(alice).weight == 2.5


def test_a_site_default_change_reaches_users_who_left_it_unset(alice, settings):
    UserLimits.objects.create(user=alice, max_running_tasks=2)
    settings.ARGUS_USER_MAX_RUNNING_GPUS = 8
    assert limits_for(alice).max_running_gpus == 8
    assert limits_for(alice).max_running_tasks == 2


def test_limits_by_user_is_one_query_for_any_number_of_users(make_user, site_limits, django_assert_num_queries):
    users = [make_user(f"user{i}") for i in range(30)]
    UserLimits.objects.create(user=users[0], max_running_gpus=2, fair_share_weight=3.0)
    UserLimits.objects.create(user=users[1], max_queued_tasks=0)
    with django_assert_num_queries(1):
        found = limits_by_user(user.pk for user in users)
    assert set(found) == {user.pk for user in users}
    assert found[users[0].pk] == Limits(max_running_gpus=2, max_running_tasks=4, max_queued_tasks=10, weight=3.0)
    assert found[users[1].pk] == Limits(max_running_gpus=16, max_running_tasks=4, max_queued_tasks=0, weight=1.0)
    assert all(found[user.pk] == site_limits for user in users[2:])


def test_limits_by_user_reads_the_whole_table_for_very_many_ids(alice, bob, django_assert_num_queries):
    UserLimits.objects.create(user=alice, max_running_tasks=1)
    ids = [alice.pk, bob.pk, *range(10_000, 12_000)]  # more ids than one statement may carry on old SQLite
    with django_assert_num_queries(1) as context:
        found = limits_by_user(ids)
    assert " IN (" not in context.captured_queries[0]["sql"]
    assert len(found) == len(ids)
    assert found[alice.pk].max_running_tasks == 1
    assert found[bob.pk].max_running_tasks == 0


def test_limits_by_user_of_no_one_asks_nothing(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert limits_by_user([]) == {}


def test_limits_for_uses_limits_loaded_with_the_user(alice, django_assert_num_queries):
    UserLimits.objects.create(user=alice, max_queued_tasks=7)
    user = type(alice).objects.select_related("limits").get(pk=alice.pk)
    with django_assert_num_queries(0):
        assert limits_for(user).max_queued_tasks == 7


def test_set_limits_creates_the_row_then_changes_only_what_it_is_given(alice, site_limits):
    set_limits(alice, actor="test", max_queued_tasks=5, fair_share_weight=2.0)
    set_limits(alice, actor="test", max_running_gpus=8)
    row = UserLimits.objects.get(user=alice)
    assert (row.max_running_gpus, row.max_running_tasks, row.max_queued_tasks, row.fair_share_weight) == (
        8,
        None,
        5,
        2.0,
    )
    set_limits(alice, actor="test", max_queued_tasks=None)
    assert limits_for(alice).max_queued_tasks == site_limits.max_queued_tasks


def test_set_limits_with_nothing_to_set_writes_nothing(alice):
    set_limits(alice, actor="test")
    assert not UserLimits.objects.exists()


def test_set_limits_refuses_what_is_not_a_limit(alice):
    with pytest.raises(TypeError, match="is_staff"):
        set_limits(alice, actor="test", is_staff=True)


# --- can_use_high_priority ---------------------------------------------------------------------


def test_high_priority_is_not_granted_by_default(alice):
    assert UserLimits(user=alice).can_use_high_priority is False
    assert not may_use_high_priority(alice)  # no row of her own
    UserLimits.objects.create(user=alice, max_queued_tasks=3)
    alice.refresh_from_db()
    assert not may_use_high_priority(alice)  # a row of her own, without the grant


def test_an_admin_always_may_use_high_priority(admin):
    assert may_use_high_priority(admin)
    UserLimits.objects.create(user=admin, can_use_high_priority=False)
    admin.refresh_from_db()
    assert may_use_high_priority(admin) and high_priority_refusal(admin) is None


def test_set_limits_grants_and_withdraws_high_priority(alice):
    set_limits(alice, actor="test", can_use_high_priority=True)
    assert may_use_high_priority(alice) and high_priority_refusal(alice) is None
    set_limits(alice, actor="test", can_use_high_priority=False)
    assert not may_use_high_priority(alice)


def test_the_refusal_says_who_can_grant_it(bob):
    assert high_priority_refusal(bob) == (
        "priority: high is not allowed for bob; an administrator can grant it "
        "(can_use_high_priority, in the admin site or PATCH /api/v2/users/bob)"
    )


def test_may_use_high_priority_uses_limits_loaded_with_the_user(alice, django_assert_num_queries):
    UserLimits.objects.create(user=alice, can_use_high_priority=True)
    user = type(alice).objects.select_related("limits").get(pk=alice.pk)
    with django_assert_num_queries(0):
        assert may_use_high_priority(user)


@pytest.mark.parametrize("weight", [0.0, -1.0, math.inf, math.nan])
def test_a_weight_must_be_a_finite_number_above_0(alice, weight):
    with pytest.raises(ValidationError) as caught:
        UserLimits(user=alice, fair_share_weight=weight).full_clean()
    assert "fair_share_weight" in caught.value.message_dict


def test_the_database_refuses_a_weight_of_0_too(alice):
    with pytest.raises(IntegrityError), transaction.atomic():
        UserLimits.objects.create(user=alice, fair_share_weight=0.0)


def test_a_limit_is_bounded_by_what_every_database_stores(alice):
    with pytest.raises(ValidationError) as caught:
        UserLimits(user=alice, max_running_gpus=LIMIT_MAX + 1).full_clean()
    assert "max_running_gpus" in caught.value.message_dict
    UserLimits(user=alice, max_running_gpus=LIMIT_MAX).full_clean()


def test_the_limits_go_with_the_user(alice):
    UserLimits.objects.create(user=alice, max_running_tasks=1)
    alice.delete()
    assert not UserLimits.objects.exists()


@pytest.mark.parametrize(
    ("limit", "waiting", "refused"),
    [(0, 1000, False), (5, 4, False), (5, 5, True), (5, 7, True), (1, 1, True)],
)
def test_queued_limit_error(limit, waiting, refused):
    message = queued_limit_error("alice", limit, waiting)
    assert (message is not None) == refused
    if refused:
        assert message is not None
        assert message.startswith(f"alice has {waiting} task")
        assert f"max_queued_tasks is {limit}" in message


def test_queued_limit_error_says_task_for_one():
    assert queued_limit_error("alice", 1, 1) == (
        "alice has 1 task waiting; max_queued_tasks is 1. Wait for one to start, or cancel one."
    )


@pytest.mark.parametrize(
    ("limit", "waiting", "adding", "refused"),
    [(0, 1000, 50, False), (5, 2, 3, False), (5, 2, 4, True), (5, 5, 1, True), (5, 0, 6, True)],
)
def test_queued_limit_error_counts_every_task_a_submission_adds(limit, waiting, adding, refused):
    """A pipeline adds all its steps at once: they fit together or none is made."""
    assert (queued_limit_error("alice", limit, waiting, adding) is not None) == refused


def test_queued_limit_error_says_when_some_fit_but_not_all():
    assert queued_limit_error("alice", 5, 3, 4) == (
        "alice has 3 tasks waiting and this adds 4; max_queued_tasks is 5. Wait for some to start, or cancel some."
    )
