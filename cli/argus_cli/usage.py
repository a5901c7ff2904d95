"""`argus usage`: who used the GPUs, as GET /api/v2/usage reports it."""

from __future__ import annotations

from typing import Any

from argus_cli import render

# The report's columns, as the table heads them (``user`` only by user).
HEADS = {
    "group": "GROUP",
    "user": "USER",
    "gpu_hours": "GPU-H",
    "in_quota_gpu_hours": "IN QUOTA",
    "borrowed_gpu_hours": "BORROWED",
    "lost_gpu_hours": "LOST",
    "tasks": "TASKS",
    "mean_wait_s": "MEAN WAIT",
}


def cell(name: str, value: Any) -> str:
    if value is None:
        return "(no group)" if name == "group" else "-"
    if name == "mean_wait_s":
        return f"{value:.0f} s"
    return str(value)


def show(report: dict[str, Any]) -> None:
    """The report as a table, its window above it."""
    names = [name for name in HEADS if name != "user" or report["by"] == "user"]
    render.say(f"GPU usage by {report['by']}, {report['since']} to {report['until']}")
    render.table(
        [HEADS[name] for name in names],
        [[cell(name, row[name]) for name in names] for row in report["rows"]],
        empty="No usage in this window.",
    )
