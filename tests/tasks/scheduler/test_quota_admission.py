"""Admission by quota (issue 27 item 2), the pure core: the quota arithmetic over plain numbers
(tasks.scheduler.quotas) and admission.decide with groups."""

from __future__ import annotations

from tasks.queue.request import Request
from tasks.scheduler.admission import BACKFILL, BEST_EFFORT_FIFO, STRICT_FIFO, Caps, Running, decide, preemption_holds
from tasks.scheduler.quotas import GroupQuota, Ledger, borrowed, gpus_in_use, lendable, with_ungrouped
from tasks.scheduler.rooms import Room

NOTHING_IDLE = "nothing idle to borrow in other groups' quotas (their lend limits)"

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


# --- reclaim (issue 27 item 4): an in-quota task takes back room other groups borrow ----------

TWO_NODES = nodes(a=4, b=4)
QUOTAS = {"vision": GroupQuota(4), "nlp": GroupQuota(4)}
FULL = nodes(a=0, b=0)  # every GPU held


def borrower(
    key: int,
    node: str,
    *,
    started: float = 0.0,
    checkpoint: float | None = None,
    every: float | None = None,
    ends: float | None = None,
    stopping: bool = False,
    settling_in: bool = False,
) -> Running:
    """A task of nlp that runs on 4 borrowed GPUs of ``node``."""
    return Running(
        key,
        {node: 4},
        0.0,
        ends,
        "nia",
        started_at=started,
        stopping=stopping,
        group="nlp",
        borrowed=True,
        checkpoint_at=checkpoint,
        checkpoint_every_s=every,
        settling_in=settling_in,
    )


def test_an_in_quota_task_reclaims_a_borrowed_task_whatever_its_priority():
    # nlp borrows node b (vision's idle quota); vision now submits a task within its nominal.
    running = [run(10, "a", 4, "nlp"), Running(11, {"b": 4}, 0.0, None, "nia", priority=2, group="nlp", borrowed=True)]
    decision = decide([req(1, 4, group="vision")], FULL, TWO_NODES, running=running, groups=QUOTAS, now=100.0)
    assert decision.reclaim == {11: 1}
    assert decision.preempt == {}  # not a priority preemption, and not preemptible
    assert decision.admitted == []
    assert decision.waiting[1].endswith("; reclaiming 1 borrowed task of other groups to make room")


def test_the_victim_losing_the_least_work_is_chosen():
    quotas = {"vision": GroupQuota(4), "nlp": GroupQuota(0)}
    running = [borrower(10, "a", started=0.0, checkpoint=90.0), borrower(11, "b", started=50.0)]
    decision = decide([req(1, 4, group="vision")], FULL, TWO_NODES, running=running, groups=quotas, now=100.0)
    assert decision.reclaim == {10: 1}  # 10 s of work since its checkpoint, against 50 s


def test_no_reclaim_beyond_nominal_nor_from_its_own_group_nor_the_settling_or_stopping():
    running = [run(10, "a", 4, "nlp"), borrower(11, "b")]
    # vision's nominal is 4: a task of 8 would borrow, and borrowing takes nothing back.
    beyond = decide([req(1, 4, nnodes=2, group="vision")], FULL, TWO_NODES, running=running, groups=QUOTAS)
    assert beyond.reclaim == {}
    # nlp's own task within its quota does not reclaim from nlp.
    own = decide([req(1, 4, group="nlp")], FULL, TWO_NODES, running=running, groups={"nlp": GroupQuota(8)})
    assert own.reclaim == {}
    for held in (borrower(11, "b", settling_in=True), borrower(11, "b", stopping=True)):
        decision = decide([req(1, 4, group="vision")], FULL, TWO_NODES, running=[running[0], held], groups=QUOTAS)
        assert decision.reclaim == {}
    # Tasks recorded in quota while their group runs within its nominal are never victims.
    decision = decide(
        [req(1, 4, group="vision")],
        FULL,
        TWO_NODES,
        running=[run(10, "a", 4, "nlp"), run(11, "b", 4, "nlp")],
        groups={**QUOTAS, "nlp": GroupQuota(8)},
    )
    assert decision.reclaim == {}
    assert not decide([req(1, 4, group="vision")], FULL, TWO_NODES, running=running).reclaim  # no groups


def test_a_stopping_victims_room_serves_one_task_and_the_next_reclaims_more():
    quotas = {"vision": GroupQuota(8), "nlp": GroupQuota(0)}
    queue = [req(1, 4, group="vision"), req(2, 4, group="vision")]
    # One pass: two tasks of vision, two victims.
    decision = decide(
        queue, FULL, TWO_NODES, running=[borrower(10, "a"), borrower(11, "b")], groups=quotas, policy=BACKFILL
    )
    assert decision.reclaim == {10: 1, 11: 2}
    # The next pass: 10 is stopping; the first task waits for it, the second reclaims 11.
    running = [borrower(10, "a", stopping=True, ends=30.0), borrower(11, "b")]
    decision = decide(queue, FULL, TWO_NODES, running=running, groups=quotas, policy=BACKFILL)
    assert decision.waiting[1].endswith("; waiting for 1 task being stopped")
    assert decision.reclaim == {11: 2}
    # What the group was promised counts: its nominal 4 is taken by the first.
    decision = decide(
        queue, FULL, TWO_NODES, running=running, groups={**quotas, "vision": GroupQuota(4)}, policy=BACKFILL
    )
    assert decision.reclaim == {}


def test_backfill_keeps_the_reclaimed_room_for_the_task_it_serves():
    running = [run(10, "a", 4, "nlp"), borrower(11, "b", checkpoint=60.0, every=100.0)]
    queue = [req(1, 4, group="vision"), Request(2, 1, 4, 0.0, "nia", 50.0, 0, group="nlp")]
    decision = decide(
        queue, FULL, TWO_NODES, running=running, groups=QUOTAS, policy=BACKFILL, now=100.0, reclaim_grace=300.0
    )
    assert decision.reclaim == {11: 1}
    # Its next checkpoint, at 160, is due within the grace: the room comes back then, for task 1.
    assert decision.reservations[1] == (160.0, {"b": 4})
    assert 2 not in {r.key for r, _ in decision.admitted}


def test_priority_preemption_is_as_it_was_beside_quotas():
    groups = {"vision": GroupQuota(8)}
    running = [Running(10, {"a": 4}, 0.0, None, "x", 0, True, group="vision")]
    queue = [req(1, 4, group="vision", priority=2)]
    decision = decide(queue, FULL, TWO_NODES, running=running, groups=groups, preemption=True)
    assert decision.preempt == {10: 1}
    assert decision.reclaim == {}


def test_a_reclaim_holds_only_while_the_task_it_serves_would_start_in_quota():
    victim = borrower(11, "b")
    running = [run(10, "a", 4, "nlp"), victim]
    request = req(1, 4, group="vision")
    assert preemption_holds(request, [victim], FULL, running, None, QUOTAS, TWO_NODES, reclaim=True) == ""
    # Its group started another task meanwhile: it would borrow now.
    grown = [*running, run(12, "c", 4, "vision")]
    totals = nodes(a=4, b=4, c=4)
    assert preemption_holds(request, [victim], FULL, grown, None, QUOTAS, totals, reclaim=True) == (
        "the task it made room for would run beyond its group's nominal quota (group vision: 4 of 4 GPUs "
        "in use, it needs 4)"
    )
    # Its group may not borrow at all: the quota holds it back.
    strict = {**QUOTAS, "vision": GroupQuota(4, borrow_limit=0)}
    assert preemption_holds(request, [victim], FULL, grown, None, strict, totals, reclaim=True) == (
        "its group's quota holds the task it made room for back (group vision: 4 of 4 GPUs in use, "
        "borrowing limited to 0 (this task needs 4))"
    )


def test_a_task_reclaim_cannot_serve_does_not_stop_another_groups_task_of_its_shape():
    quotas = {"nlp": GroupQuota(4), "vision": GroupQuota(8)}
    running = [borrower(10, "a"), run(11, "b", 4, "nlp")]
    # nlp borrows 4 (8 of 4); its task would borrow more (12 of 4): no reclaim for it; vision's,
    # of the same shape, reclaims.
    queue = [req(1, 4, group="nlp"), req(2, 4, group="vision")]
    decision = decide(queue, FULL, TWO_NODES, running=running, groups=quotas, policy=BEST_EFFORT_FIFO)
    assert decision.reclaim == {10: 2}
    assert "reclaiming" not in decision.waiting[1]


def test_a_task_reclaimed_in_a_pass_is_not_preempted_in_it_too():
    quotas = {"vision": GroupQuota(8), "nlp": GroupQuota(0)}
    victim = Running(10, {"a": 4}, 0.0, None, "nia", 0, True, group="nlp", borrowed=True)
    # The second is within vision's nominal too, but reclaim has nothing more for it; the
    # victim is preemptible and of lower priority, and already promised to the first.
    queue = [req(1, 4, group="vision"), req(2, 4, group="vision", priority=2)]
    decision = decide(
        queue, nodes(a=0), nodes(a=4), running=[victim], groups=quotas, preemption=True, policy=BEST_EFFORT_FIFO
    )
    assert decision.reclaim == {10: 1}
    assert decision.preempt == {}


def test_a_task_without_gpus_takes_no_quota_and_reclaims_nothing():
    # nlp borrows beyond its nominal, over a borrow limit lowered since: an export still starts.
    ledger = Ledger.of({"nlp": GroupQuota(0, borrow_limit=0)}, [("nlp", 4)])
    assert ledger.refusal("nlp", 0) is None
    assert not ledger.borrows("nlp", 0)
    export = Request(1, 1, 0, 8.0, "nia", None, group="vision")
    # Each holds 12 CPUs beside its GPUs: stopping one would make room for the export's 8.
    running = [
        Running(key, {node: 4}, 12.0, None, "nia", group="nlp", borrowed=True) for key, node in ((10, "a"), (11, "b"))
    ]
    full = {"a": Room(0, 0.0), "b": Room(0, 0.0)}
    decision = decide([export], full, TWO_NODES, running=running, groups=QUOTAS, policy=BEST_EFFORT_FIFO)
    assert decision.reclaim == {}
    assert decision.waiting[1] == "needs a worker node with 8 CPUs free (ARGUS_EXPORT_CPUS); 0 nodes now"


def test_a_reclaimed_task_waits_for_the_task_it_gave_its_room_back_to():
    queue = [req(1, 8, group="vision"), req(2, 4, group="nlp"), req(3, 4, group="nlp", priority=-1)]
    # 2 was reclaimed for 1, 3 preempted for 1 (which is of higher priority): 1 has no room yet.
    decision = decide(queue, nodes(a=4, b=4), TOTALS, groups=QUOTAS, yielded={2: 1, 3: 1}, policy=BEST_EFFORT_FIFO)
    assert decision.admitted == []
    assert decision.waiting[2] == (
        "it gave the room it borrowed back to a task of group vision, which has not started yet; it resumes after"
    )
    assert decision.waiting[3] == (
        "it made room for a task of higher priority that has not started yet; it resumes after"
    )


def test_room_given_back_is_not_lent_to_another_borrower_before_its_task_starts():
    # nlp's task 3 was reclaimed for vision's task 2 and is back in the queue; node a is free
    # again. nlp's task 1, ahead in the queue, would borrow vision's idle quota: it is owed to 2.
    running = [run(10, "b", 4, "nlp")]
    queue = [req(1, 4, group="nlp"), req(2, 4, group="vision"), req(3, 4, group="nlp")]
    decision = decide(queue, nodes(a=4, b=0), TWO_NODES, running=running, groups=QUOTAS, yielded={3: 2})
    assert [r.key for r, _ in decision.admitted] == [2]
    assert decision.waiting[1] == f"group nlp: 4 of 4 GPUs in use, {NOTHING_IDLE} (this task needs 4)"
    # Once it started, what it was owed is its use: nothing is owed twice.
    ledger = Ledger.of(QUOTAS, [("nlp", 4)])
    ledger.owe("vision", 4)
    assert ledger.refusal("nlp", 4) == f"group nlp: 4 of 4 GPUs in use, {NOTHING_IDLE} (this task needs 4)"
    ledger.take("vision", 4, owed=True)
    assert ledger.owed == {"vision": 0}
    assert ledger.lends("vision") == 0


def test_a_task_waiting_for_stopping_tasks_counts_those_whose_room_it_takes():
    quotas = {"vision": GroupQuota(8), "nlp": GroupQuota(0)}
    # Both stop; the task needs node a's room alone (b's is no use to it: 4 GPUs short of 8).
    running = [
        Running(10, {"a": 8}, 0.0, 30.0, "nia", stopping=True, group="nlp", borrowed=True),
        Running(11, {"b": 4}, 0.0, 30.0, "nia", stopping=True, group="nlp", borrowed=True),
    ]
    decision = decide([req(1, 8, group="vision")], nodes(a=0, b=0), nodes(a=8, b=4), running=running, groups=quotas)
    assert decision.waiting[1].endswith("; waiting for 1 task being stopped")


# --- found in review ---------------------------------------------------------------------------


def test_a_borrowed_task_whose_group_no_longer_borrows_is_not_reclaimed():
    # nlp's task 11 was admitted borrowed beside an in-quota one that has ended since: nlp now
    # runs 4 of its 4, within its nominal. The users without a group hold their 4 on b and c;
    # vision's task needs one node's 4 GPUs: no room, yet nothing is borrowed to take back
    # (stopping 11 would put nlp below its nominal for vision's sake).
    totals = nodes(a=4, b=4, c=4)
    running = [
        borrower(11, "a"),
        Running(12, {"b": 2}, 0.0, None, "ann", group=""),
        Running(13, {"c": 2}, 0.0, None, "ann", group=""),
    ]
    decision = decide([req(1, 4, group="vision")], nodes(a=0, b=2, c=2), totals, running=running, groups=QUOTAS)
    assert decision.reclaim == {}
    assert "reclaiming" not in decision.waiting[1]


def test_a_pass_reclaims_from_a_group_only_what_it_borrows():
    # nlp runs 8 of its nominal 4, both tasks recorded borrowed (its in-quota one has ended):
    # it borrows 4. Vision's two tasks within its nominal take those 4 back, not all 8.
    quotas = {"vision": GroupQuota(8), "nlp": GroupQuota(4)}
    queue = [req(1, 4, group="vision"), req(2, 4, group="vision")]
    decision = decide(
        queue, FULL, TWO_NODES, running=[borrower(10, "a"), borrower(11, "b")], groups=quotas, policy=BACKFILL
    )
    assert len(decision.reclaim) == 1
    assert set(decision.reclaim.values()) == {1}


def test_a_task_preempted_in_a_pass_is_not_reclaimed_in_it_too():
    # Vision's quota (8) and audio's (4) cover the cluster; nlp (no quota) borrows node a with a
    # preemptible task. Audio's high task may borrow vision's idle quota and preempts it; its
    # room is promised to audio's task, not also to vision's task behind it.
    quotas = {"vision": GroupQuota(8), "nlp": GroupQuota(0), "audio": GroupQuota(4)}
    victim = Running(10, {"a": 4}, 0.0, None, "nia", 0, True, group="nlp", borrowed=True)
    running = [victim, Running(11, {"b": 4}, 0.0, None, "al", group="audio")]
    queue = [req(1, 4, group="audio", priority=2), req(2, 4, group="vision")]
    decision = decide(queue, FULL, TWO_NODES, running=running, groups=quotas, preemption=True, policy=BEST_EFFORT_FIFO)
    assert decision.preempt == {10: 1}
    assert decision.reclaim == {}


def test_a_task_that_would_borrow_does_not_preempt_another_groups_task_in_its_quota():
    # Quotas cover more than the cluster (audio's 4 are idle on paper): vision's high task may
    # borrow them. Preempting nlp's task, running within nlp's quota, would have nlp reclaim the
    # room from it as soon as it started borrowing: it preempts only what borrows, or its own.
    quotas = {"vision": GroupQuota(4), "nlp": GroupQuota(4), "audio": GroupQuota(4)}
    low = Running(10, {"a": 4}, 0.0, None, "nia", 0, True, group="nlp")
    own = Running(11, {"b": 4}, 0.0, None, "vic", 0, True, group="vision")
    high = req(1, 4, group="vision", priority=2)
    decision = decide([high], FULL, TWO_NODES, running=[low, own], groups=quotas, preemption=True)
    assert decision.preempt == {11: 1}
    # Without its own group's task to stop, it waits; nlp's task of that shape still may preempt.
    vision = Running(11, {"b": 4}, 0.0, None, "vic", 0, False, group="vision")
    nlp_high = req(2, 4, group="nlp", priority=2, user="nia")
    decision = decide(
        [high, nlp_high],
        FULL,
        TWO_NODES,
        running=[low, vision],
        groups=quotas,
        preemption=True,
        policy=BEST_EFFORT_FIFO,
    )
    assert decision.preempt == {10: 2}


def test_one_reclaim_takes_from_a_group_no_more_than_it_borrows():
    # nlp runs 8 of its nominal 4 (both recorded borrowed: its in-quota task has ended), the
    # users without a group 4 of their 0. Vision's task needs two whole nodes: nlp's two tasks
    # lose the least work, but taking both would put nlp 4 below its nominal (and have it
    # reclaim in turn); one of nlp's and the ungrouped task are taken.
    quotas = {"vision": GroupQuota(8), "nlp": GroupQuota(4)}
    running = [
        borrower(10, "a", checkpoint=95.0),
        borrower(11, "b", checkpoint=90.0),
        Running(12, {"c": 4}, 0.0, None, "ann", started_at=0.0, group="", borrowed=True),
    ]
    decision = decide(
        [req(1, 4, nnodes=2, group="vision")],
        nodes(a=0, b=0, c=0),
        nodes(a=4, b=4, c=4),
        running=running,
        groups=quotas,
        now=100.0,
    )
    assert decision.reclaim == {10: 1, 12: 1}


def test_tasks_recorded_in_quota_beyond_a_cut_nominal_give_it_back_as_borrowed_ones_do():
    # nlp's two tasks were admitted in its quota of 8 (or before there were groups); its quota
    # is now 4: it runs 4 beyond it. Vision, within its nominal, takes that back from the one
    # that loses the least, and no more than nlp runs beyond its nominal.
    running = [
        Running(10, {"a": 4}, 0.0, None, "nia", started_at=0.0, group="nlp"),
        Running(11, {"b": 4}, 0.0, None, "nia", started_at=50.0, group="nlp"),
    ]
    queue = [req(1, 4, group="vision"), req(2, 4, group="vision")]
    decision = decide(queue, FULL, TWO_NODES, running=running, groups=QUOTAS, now=100.0, policy=BACKFILL)
    assert decision.reclaim == {11: 1}  # 4 x 50 GPU-seconds lost, not 4 x 100
    # Within its nominal again, nlp's tasks recorded in quota are no one's victims.
    within = decide(queue, FULL, TWO_NODES, running=running, groups={**QUOTAS, "nlp": GroupQuota(8)}, now=100.0)
    assert within.reclaim == {}


# --- churn: passes that never settle (found by bench/policy_sim.py) ----------------------------


def _next_pass(
    queue: list[Request], free: dict[str, Room], running: list[Running], yielded: dict[int, int], now: float
) -> tuple[list[Request], dict[str, Room], list[Running], dict[int, int], dict[int, int]]:
    """One pass of decide over three groups, then what the tick does with it: the admitted run
    (borrowed ones recorded so), the reclaim's victims stop at once (no checkpoint due) and wait
    again yielding to the task they served; a task that started is no longer yielded to.
    Returns the next pass's queue, free room, running tasks and yields, and this pass's reclaims."""
    quotas = {"vision": GroupQuota(4), "nlp": GroupQuota(8), "rl": GroupQuota(4)}
    decision = decide(
        queue,
        free,
        nodes(a=4, b=4, c=4, d=4),
        policy=BACKFILL,
        now=now,
        running=running,
        yielded=yielded,
        groups=quotas,
    )
    free = dict(free)
    for request, placement in decision.admitted:
        for node, gpus in placement.items():
            free[node] = Room(free[node].gpus - gpus, free[node].cpus)
        running = [
            *running,
            Running(
                request.key,
                placement,
                0.0,
                None,
                request.user,
                started_at=now,
                group=request.group,
                borrowed=request.key in decision.borrowing,
            ),
        ]
    started = {request.key for request, _ in decision.admitted}
    stopped = [holder for holder in running if holder.key in decision.reclaim]
    for holder in stopped:
        for node, gpus in holder.placement.items():
            free[node] = Room(free[node].gpus + gpus, free[node].cpus)
    running = [holder for holder in running if holder.key not in decision.reclaim]
    yielded = {victim: task for victim, task in {**yielded, **decision.reclaim}.items() if task not in started}
    queue = [request for request in queue if request.key not in started]
    queue += [req(holder.key, holder.gpus, group=holder.group) for holder in stopped]
    return queue, free, running, yielded, decision.reclaim


def test_room_taken_back_for_a_task_is_not_lent_to_a_borrower_ahead_of_it():
    # rl's task 2 (within rl's nominal of 4) had vision's borrowed tasks 3 and 4 reclaimed for
    # it: they stopped, node b is free again. Vision (6 of its 4 in use) may still borrow 2 of
    # nlp's idle quota (nlp runs 4 of 8): its task 1, ahead of 2 in the queue, fits on b and
    # nowhere else (c and d have 1 GPU free each). Were it to start there, the next pass would
    # reclaim it for 2 (it lost nothing yet), the next vision task would start there, and so on.
    running = [
        run(10, "a", 4, "vision"),
        run(12, "c", 2, "vision", borrowed=True),
        run(11, "c", 1, "nlp"),
        run(13, "d", 3, "nlp"),
    ]
    queue = [req(1, 2, group="vision"), req(5, 2, group="vision"), req(2, 4, group="rl", user="rolf")]
    queue += [req(3, 2, group="vision"), req(4, 2, group="vision")]
    free, yielded = nodes(a=0, b=4, c=1, d=1), {3: 2, 4: 2}
    reclaims = []
    for now in (100.0, 101.0, 102.0, 103.0):
        queue, free, running, yielded, reclaim = _next_pass(queue, free, running, yielded, now)
        reclaims.append(reclaim)
    assert reclaims == [{}, {}, {}, {}]
    rl_task = next(holder for holder in running if holder.key == 2)
    assert rl_task.placement == {"b": 4} and not rl_task.borrowed and rl_task.started_at == 100.0
    assert {request.key for request in queue} == {1, 3, 4, 5}  # nowhere to borrow from now
