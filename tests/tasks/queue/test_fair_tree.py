"""Fair share across and within groups (tasks.queue.fairshare.fair_tree; pure): groups ordered by
their decayed usage over their weight, then users within a group by the classic factor."""

from __future__ import annotations

import pytest

from tasks.queue.fairshare import Waiting, factors, fair_tree, order

HOUR = 3600.0
WINDOW = HOUR

# vision used 900 GPU-seconds (ann 800, bob 100), nlp 300 (cat 200, dan 100).
USAGE = {"ann": 800.0, "bob": 100.0, "cat": 200.0, "dan": 100.0}
GROUPS = {"ann": "vision", "bob": "vision", "cat": "nlp", "dan": "nlp"}


def keys(waiting: list[Waiting], factor: dict[str, float]) -> list[int]:
    return [w.key for w in order(waiting, factor, WINDOW)]


def test_every_user_of_a_lighter_group_ranks_before_every_user_of_a_heavier_one():
    tree = fair_tree(USAGE, {}, USAGE, GROUPS)
    f = tree.factor
    # bob is lighter than cat as users go, but vision is the heavier group.
    assert factors(USAGE, {}, USAGE)["bob"] > factors(USAGE, {}, USAGE)["cat"]
    assert min(f["cat"], f["dan"]) > max(f["ann"], f["bob"])
    # Two levels: vision's band is (0, 1/2], nlp's (1/2, 1].
    assert (tree.rank, tree.levels) == ({"vision": 0, "nlp": 1}, 2)
    assert tree.group_usage == {"vision": 900.0, "nlp": 300.0}
    assert 0.0 < f["ann"] < f["bob"] <= 0.5 < f["cat"] < f["dan"] <= 1.0


def test_a_light_groups_task_passes_a_heavy_groups_submitted_earlier():
    f = fair_tree(USAGE, {}, USAGE, GROUPS).factor
    # bob (vision) submitted 10 minutes before cat (nlp), both normal priority.
    queue = [Waiting(1, "bob", 0, 0.0), Waiting(2, "cat", 0, 600.0)]
    assert keys(queue, f) == [2, 1]
    # Without groups bob, the lighter user, keeps his place.
    assert keys(queue, factors(USAGE, {}, USAGE)) == [1, 2]


def test_within_a_group_users_are_ordered_as_today():
    f = fair_tree(USAGE, {}, USAGE, GROUPS).factor
    within = factors({"ann": 800.0, "bob": 100.0}, {}, ["ann", "bob"])
    # A point of vision's band (rank 0 of 2 levels): today's factor among its members, halved.
    assert f["ann"] == pytest.approx(within["ann"] / 2)
    assert f["bob"] == pytest.approx(within["bob"] / 2)
    nlp = factors({"cat": 200.0, "dan": 100.0}, {}, ["cat", "dan"])
    assert f["cat"] == pytest.approx((1 + nlp["cat"]) / 2)
    # A user weight counts within the group: ann weighted 16 is lighter than bob now.
    weighted = fair_tree(USAGE, {"ann": 16.0}, USAGE, GROUPS).factor
    assert weighted["ann"] > weighted["bob"]
    assert min(weighted["cat"], weighted["dan"]) > weighted["ann"]


def test_group_weights_matter():
    # vision weighted 4: 900 / 4 = 225 below nlp's 300: vision is the lighter group now.
    tree = fair_tree(USAGE, {}, USAGE, GROUPS, {"vision": 4.0})
    assert min(tree.factor["ann"], tree.factor["bob"]) > max(tree.factor["cat"], tree.factor["dan"])
    assert tree.group_factor["vision"] > tree.group_factor["nlp"]
    queue = [Waiting(1, "cat", 0, 0.0), Waiting(2, "ann", 0, 600.0)]
    assert keys(queue, tree.factor) == [2, 1]
    # Weighted 3: 300 each, alike: one level, the users of both compared by their own factors.
    even = fair_tree(USAGE, {}, USAGE, GROUPS, {"vision": 3.0})
    assert (even.rank, even.levels) == ({"vision": 0, "nlp": 0}, 1)
    assert even.group_factor["vision"] == pytest.approx(even.group_factor["nlp"])


def test_a_task_waiting_longer_than_the_window_is_not_passed():
    f = fair_tree(USAGE, {}, USAGE, GROUPS).factor
    # ann is the heaviest user of the heaviest group; dan, of the lightest, has the highest factor.
    assert f["dan"] - f["ann"] < 1.0
    late = [Waiting(1, "ann", 0, 0.0), Waiting(2, "dan", 0, WINDOW + 1.0)]
    assert keys(late, f) == [1, 2]
    # Even against a factor of 1 and one near 0, the window bounds the pass.
    assert keys(late, {"ann": 1e-300, "dan": 1.0}) == [1, 2]
    # Within the window it passes.
    assert keys([Waiting(1, "ann", 0, 0.0), Waiting(2, "dan", 0, 60.0)], f) == [2, 1]


def test_no_groups_gives_todays_factors_exactly():
    users = ["ann", "bob", "cat", "dan", "eve"]
    weights = {"bob": 2.5}
    today = factors(USAGE, weights, users)
    for group_of in (None, {}, {"ann": "", "bob": ""}):
        tree = fair_tree(USAGE, weights, users, group_of)
        assert tree.factor == today  # float for float
        assert (tree.rank, tree.levels) == ({"": 0}, 1)
    queue = [Waiting(k, user, 0, 100.0 * k) for k, user in enumerate(users * 3)]
    assert keys(queue, fair_tree(USAGE, weights, users).factor) == keys(queue, today)
    assert fair_tree({}, {}, []).factor == {}


def test_users_without_a_group_are_one_group_of_weight_one():
    # eve and fay have no group: together 500, against vision's 900 and nlp's 300.
    usage = {**USAGE, "eve": 400.0, "fay": 100.0}
    tree = fair_tree(usage, {}, usage, GROUPS)
    assert tree.group_usage[""] == 500.0
    assert tree.rank == {"vision": 0, "": 1, "nlp": 2}
    f = tree.factor
    assert max(f["ann"], f["bob"]) < min(f["eve"], f["fay"]) <= max(f["eve"], f["fay"]) < min(f["cat"], f["dan"])
    # Weight 1 against nlp's 2: nlp (300 / 2 = 150) below "" (500 / 1), and vision (900 / 4).
    weighted = fair_tree(usage, {}, usage, GROUPS, {"nlp": 2.0, "vision": 4.0})
    assert weighted.rank == {"": 0, "vision": 1, "nlp": 2}


def test_a_newcomer_stands_at_the_top_of_its_groups_band():
    tree = fair_tree(USAGE, {}, USAGE, GROUPS)
    assert tree.newcomer("vision") == 0.5  # above every vision user, below every nlp user
    assert tree.newcomer("nlp") == 1.0
    assert tree.newcomer("audio") == 1.0  # a group with no usage: the lightest
    # It is what counting them would give them.
    counted = fair_tree(USAGE, {}, [*USAGE, "gus"], {**GROUPS, "gus": "vision"})
    assert counted.factor["gus"] == tree.newcomer("vision")
