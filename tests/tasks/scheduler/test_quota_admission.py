"""Admission by quota (issue 27 item 2), the pure core: the quota arithmetic over plain numbers
(tasks.scheduler.quotas) and admission.decide with groups."""

from __future__ import annotations

from tasks.queue.request import Request
from tasks.scheduler.admission import BACKFILL, STRICT_FIFO, Caps, Running, decide
from tasks.scheduler.quotas import GroupQuota, Ledger, borrowed, gpus_in_use, lendable, with_ungrouped
from tasks.scheduler.rooms import Room

# --- the arithmetic -------------------------------------------------------------------------


def test_in_use_borrowed_and_lendable_per_group():
    in_use = gpus_in_use([("vision", 4), ("nlp", 2), ("vision", 8), ("", 1)])
    assert in_use == {"vision": 12, "nlp": 2, "": 1}
    vision, nlp = GroupQuota(8), GroupQuota(8, lend_limit=4)
    assert borrowed(vision, 12) == 4
    assert borrowed(nlp, 2) == 0
    assert lendable(vision, 12) == 0  # over its nominal: nothing idle
    assert lendable(nlp, 2) == 4  # 6 idle, lends at most 4
    assert lendable(GroupQuota(8), 2) == 6  # no lend limit: all of its idle quota


def test_the_users_without_a_group_have_what_no_quota_covers():
    groups = {"vision": GroupQuota(8), "nlp": GroupQuota(4)}
    assert with_ungrouped(groups, 16)[""] == GroupQuota(4)
    assert with_ungrouped(groups, 10)[""] == GroupQuota(0)  # quotas that cover more than there is
    own = {**groups, "": GroupQuota(2, borrow_limit=0)}
    assert with_ungrouped(own, 16)[""] == GroupQuota(2, borrow_limit=0)


def test_within_nominal_no_borrowing():
    ledger = Ledger.of({"vision": GroupQuota(8, borrow_limit=0)}, [("vision", 4)])
    assert ledger.refusal("vision", 4) is None
    assert not ledger.borrows("vision", 4)


def test_the_borrow_limit_bounds_what_is_used_beyond_nominal():
    quotas = {"vision": GroupQuota(8, borrow_limit=0), "nlp": GroupQuota(8)}
    ledger = Ledger.of(quotas, [("vision", 8)])
    assert ledger.refusal("vision", 1) == (
        "group vision: 8 of 8 GPUs in use, borrowing limited to 0 (this task needs 1)"
    )
    quotas = {"vision": GroupQuota(8, borrow_limit=4), "nlp": GroupQuota(8)}
    ledger = Ledger.of(quotas, [("vision", 6)])
    assert ledger.refusal("vision", 6) is None  # borrows 4
    assert ledger.borrows("vision", 6)
    assert ledger.refusal("vision", 7) == (
        "group vision: 6 of 8 GPUs in use, borrowing limited to 4 (this task needs 7)"
    )
    ledger.take("vision", 6)
    assert ledger.refusal("vision", 1) == (
        "group vision: 12 of 8 GPUs in use, borrowing limited to 4 (this task needs 1)"
    )


def test_borrowing_is_bounded_by_what_the_others_lend():
    quotas = {"vision": GroupQuota(8), "nlp": GroupQuota(8, lend_limit=2), "audio": GroupQuota(4, lend_limit=0)}
    ledger = Ledger.of(quotas, [("vision", 8), ("nlp", 4)])
    # nlp has 4 idle and lends 2 of them; audio lends none of its 4.
    assert ledger.refusal("vision", 2) is None
    assert ledger.refusal("vision", 3) == (
        "group vision: 8 of 8 GPUs in use, only 2 idle to borrow in other groups' quotas (their lend "
        "limits) (this task needs 3)"
    )
    ledger.take("vision", 2)
    assert ledger.refusal("vision", 1) == (
        "group vision: 10 of 8 GPUs in use, nothing idle to borrow in other groups' quotas (their lend "
        "limits) (this task needs 1)"
    )


def test_what_another_group_borrowed_is_not_lent_twice():
    quotas = {"vision": GroupQuota(8), "nlp": GroupQuota(8), "audio": GroupQuota(8)}
    # audio idle (8 to lend); nlp already borrows 6 of it.
    ledger = Ledger.of(quotas, [("vision", 8), ("nlp", 14)])
    assert ledger.refusal("vision", 2) is None
    assert ledger.refusal("vision", 3) is not None


def test_a_lender_that_borrows_lends_nothing():
    # vision has 4 idle, but a task of 8 takes it beyond its nominal: what it lent is not idle then.
    quotas = {"vision": GroupQuota(8), "nlp": GroupQuota(0, lend_limit=0)}
    ledger = Ledger.of(quotas, [("vision", 4)])
    assert ledger.refusal("vision", 4) is None
    assert ledger.refusal("vision", 5) == (
        "group vision: 4 of 8 GPUs in use, nothing idle to borrow in other groups' quotas (their lend "
        "limits) (this task needs 5)"
    )


def test_a_group_without_a_quota_borrows_nothing():
    ledger = Ledger.of({"vision": GroupQuota(8)}, [])
    assert ledger.refusal("gone", 1) == "group gone: 0 of 0 GPUs in use, borrowing limited to 0 (this task needs 1)"


def test_the_ungrouped_are_named_as_such():
    ledger = Ledger.of({"": GroupQuota(0), "vision": GroupQuota(8, lend_limit=0)}, [])
    assert ledger.refusal("", 1) == (
        "users without a group: 0 of 0 GPUs in use, nothing idle to borrow in other groups' quotas "
        "(their lend limits) (this task needs 1)"
    )


# --- admission.decide with groups ------------------------------------------------------------


def req(key: int, gpus: int, *, user: str = "u", group: str = "", nnodes: int = 1, priority: int = 0) -> Request:
    return Request(key, nnodes, gpus, 0.0, user, None, priority, group=group)


def nodes(**gpus: int) -> dict[str, Room]:
    return {node: Room(g, 100.0) for node, g in gpus.items()}


TOTALS = nodes(a=8, b=8, c=8, d=8)


def run(key: int, node: str, gpus: int, group: str, *, borrowed: bool = False, user: str = "x") -> Running:
    return Running(key, {node: gpus}, 0.0, None, user, group=group, borrowed=borrowed)


def test_without_groups_nothing_changes():
    queue = [req(1, 8, group="vision"), req(2, 8, group="vision")]
    no_groups: tuple[dict[str, GroupQuota] | None, ...] = (None, {})
    for groups in no_groups:
        decision = decide(queue, nodes(a=8, b=8), TOTALS, groups=groups)
        assert [r.key for r, _ in decision.admitted] == [1, 2]
        assert decision.borrowing == set()


def test_within_quota_then_borrowing_then_waiting():
    groups = {"vision": GroupQuota(8, borrow_limit=8), "nlp": GroupQuota(24)}
    queue = [req(1, 8, group="vision"), req(2, 8, group="vision"), req(3, 8, group="vision")]
    decision = decide(queue, TOTALS, TOTALS, groups=groups, policy=BACKFILL)
    # Two tasks of one group in one pass are counted together: the second borrows, the third
    # would borrow beyond the limit.
    assert [r.key for r, _ in decision.admitted] == [1, 2]
    assert decision.borrowing == {2}
    assert decision.waiting[3] == "group vision: 16 of 8 GPUs in use, borrowing limited to 8 (this task needs 8)"
    # It waits without blocking: nlp's task behind it starts.
    decision = decide([*queue, req(4, 8, group="nlp")], TOTALS, TOTALS, groups=groups, policy=STRICT_FIFO)
    assert [r.key for r, _ in decision.admitted] == [1, 2, 4]
    assert 3 in decision.waiting and 3 not in decision.short


def test_running_tasks_count_against_the_group_they_were_admitted_in():
    groups = {"vision": GroupQuota(8, borrow_limit=0), "nlp": GroupQuota(8)}
    running = [run(10, "a", 8, "vision")]
    decision = decide(
        [req(1, 4, group="vision"), req(2, 4, group="nlp")], nodes(b=8), nodes(a=8, b=8), running=running, groups=groups
    )
    assert [r.key for r, _ in decision.admitted] == [2]
    assert decision.waiting[1] == "group vision: 8 of 8 GPUs in use, borrowing limited to 0 (this task needs 4)"


def test_two_groups_in_one_pass_share_the_lent_quota():
    # 32 GPUs: vision 8, nlp 8, audio 16 idle and lending 8 of it.
    groups = {"vision": GroupQuota(8), "nlp": GroupQuota(8), "audio": GroupQuota(16, lend_limit=8)}
    queue = [req(1, 8, group="vision"), req(2, 8, group="nlp"), req(3, 8, group="vision"), req(4, 8, group="nlp")]
    decision = decide(queue, TOTALS, TOTALS, groups=groups, policy=BACKFILL)
    assert [r.key for r, _ in decision.admitted] == [1, 2, 3]
    assert decision.borrowing == {3}
    assert decision.waiting[4] == (
        "group nlp: 8 of 8 GPUs in use, nothing idle to borrow in other groups' quotas (their lend limits) "
        "(this task needs 8)"
    )


def test_the_ungrouped_share_what_no_quota_covers():
    groups = {"vision": GroupQuota(24, lend_limit=0)}  # 8 of 32 GPUs are the ungrouped users'
    queue = [req(1, 8, user="ann"), req(2, 1, user="bob"), req(3, 8, group="vision")]
    decision = decide(queue, TOTALS, TOTALS, groups=groups, policy=BACKFILL)
    assert [r.key for r, _ in decision.admitted] == [1, 3]
    assert decision.waiting[2] == (
        "users without a group: 8 of 8 GPUs in use, nothing idle to borrow in other groups' quotas "
        "(their lend limits) (this task needs 1)"
    )


def test_user_limits_still_apply_inside_a_group():
    groups = {"vision": GroupQuota(32)}
    caps = {"ann": Caps(max_gpus=8)}
    queue = [
        req(1, 8, user="ann", group="vision"),
        req(2, 8, user="ann", group="vision"),
        req(3, 8, user="bob", group="vision"),
    ]
    decision = decide(queue, TOTALS, TOTALS, groups=groups, caps=caps, policy=BACKFILL)
    assert [r.key for r, _ in decision.admitted] == [1, 3]
    assert "ann has 8 GPUs in use" in decision.waiting[2]


def test_a_high_task_beyond_its_quota_still_waits_for_it():
    groups = {"vision": GroupQuota(8, borrow_limit=0), "nlp": GroupQuota(24)}
    running = [run(10, "a", 8, "vision")]
    queue = [req(1, 8, group="vision", priority=2), req(2, 8, group="nlp")]
    decision = decide(queue, nodes(b=8, c=8, d=8), TOTALS, running=running, groups=groups, policy=BACKFILL)
    assert [r.key for r, _ in decision.admitted] == [2]
    assert decision.waiting[1].startswith("group vision: 8 of 8 GPUs in use, borrowing limited to 0")
