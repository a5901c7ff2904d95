"""Why a task waits, in words (``Task.pending_reason``): a narrow table of its own, one row per
task that was ever given a reason.

The scheduler's first tick over a new queue gives each of its tasks a reason; in the task's own
row (spec and raw spec included, ~1 KB) SQLite rewrote some 2,500 pages for 10,000 reasons, a
third of the tick (bench/tick.py). Here a reason is a row of two columns, written by one
statement for the lot (``write``). Whoever lists reasons joins them in the same query
(``select_related("pending")``, or ``pending__text`` in values).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from django.db import IntegrityError, connection, models, transaction

from tasks.choices import QUEUE_STATES

MAX_LENGTH = 500


class PendingReason(models.Model):
    task = models.OneToOneField("tasks.Task", primary_key=True, on_delete=models.CASCADE, related_name="pending")
    text = models.CharField(max_length=MAX_LENGTH, blank=True)

    class Meta:
        app_label = "tasks"

    def __str__(self) -> str:
        return self.text


def write(reasons: Mapping[int, str], *, states: Collection[str] | None = QUEUE_STATES) -> None:
    """Each task's reason ({task pk: text}, cut to MAX_LENGTH), made or replaced, in one
    statement executed for every row (Django's bulk_create builds each row's object and
    parameters: most of the cost for 10,000 of them), only for the tasks still in one of
    ``states``: by default the queue's, so that the scheduler's reasons, computed from the queue
    as it read it, are not written on a task that has left it since (started, canceled); None:
    whatever its state (a move writes its task's reason, or clears it). A task deleted
    meanwhile gets none."""
    if not reasons:
        return
    rows = [(pk, reason[:MAX_LENGTH]) for pk, reason in reasons.items()]
    if states is None and not connection.in_atomic_block:
        # Unchecked first: a row whose task is gone fails the foreign key when the transaction
        # commits, and the lot is written again with each task checked (twice the cost).
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.executemany(_upsert(checked=False), rows)
            return
        except IntegrityError:
            pass
    held: tuple[str, ...] = tuple(states or ())
    checked: list[tuple[int | str, ...]] = [(pk, text, pk, *held) for pk, text in rows]
    # One transaction for the lot; within a caller's (a move's), no savepoint of its own.
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.executemany(_upsert(checked=True, states=len(held)), checked)


def _upsert(*, checked: bool, states: int = 0) -> str:
    """The statement ``write`` executes for each row: (task pk, text), and when ``checked``,
    the task's pk again (it must exist) and the ``states`` it must be in one of. SQLite
    (3.24+) and PostgreSQL both speak this upsert."""
    quote = connection.ops.quote_name
    table, task, text = quote(PendingReason._meta.db_table), quote("task_id"), quote("text")
    upsert = f" ON CONFLICT ({task}) DO UPDATE SET {text} = excluded.{text}"
    if not checked:
        return f"INSERT INTO {table} ({task}, {text}) VALUES (%s, %s)" + upsert
    tasks = PendingReason._meta.get_field("task").related_model._meta
    assert tasks.pk is not None and tasks.pk.column  # Task's id
    held = f" AND {quote('state')} IN ({', '.join(['%s'] * states)})" if states else ""
    exists = f"SELECT 1 FROM {quote(tasks.db_table)} WHERE {quote(tasks.pk.column)} = %s{held}"
    return f"INSERT INTO {table} ({task}, {text}) SELECT %s, %s WHERE EXISTS ({exists})" + upsert
