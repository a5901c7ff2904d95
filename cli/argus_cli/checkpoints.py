"""`argus checkpoints ls`: a task's checkpoints, as GET /api/v2/tasks/ID/checkpoints lists them."""

from __future__ import annotations

from typing import Any

from argus_cli import render

UNITS = ("B", "KB", "MB", "GB", "TB", "PB")


def human_bytes(count: int) -> str:
    """1000-based, as `du --si` and the task page (Django's filesizeformat is 1024-based: the
    figures differ a little; the API has the exact bytes)."""
    size, unit = float(count), 0
    while size >= 1000 and unit < len(UNITS) - 1:
        size /= 1000
        unit += 1
    return f"{count} B" if unit == 0 else f"{size:.1f} {UNITS[unit]}"


def bound(listing: dict[str, Any]) -> str:
    keep = listing["keep_checkpoints"]
    words = f"keeps the newest {keep}" if keep else "keeps every checkpoint"
    best = listing["keep_best"]
    return words + (f" and the best by {best['metric']} ({best['mode']})" if best else "")


def show(task_id: str, listing: dict[str, Any]) -> None:
    if listing["unread"]:
        render.say(f"Shared storage did not answer: {listing['unread']}")
        return
    render.say(f"{task_id} {bound(listing)}; {human_bytes(listing['total_bytes'])} in all")
    render.table(
        ["STEP", "SIZE", "LATEST", "NEEDED BY"],
        [
            [row["step"], human_bytes(row["bytes"]), "yes" if row["latest"] else "", "; ".join(row["needed_by"])]
            for row in listing["checkpoints"]
        ],
        empty="No checkpoints.",
    )
