"""How data looks in a terminal: rich tables, and plain JSON for --json.

Everything goes through rich's Text, never its markup: task ids, error summaries and paths
come from users and servers, and a "[/]" in one of them would be read as a closing tag.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELED")
STATE_STYLES = {"SUCCEEDED": "green", "FAILED": "red", "CANCELED": "yellow", "RUNNING": "cyan"}

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def say(*parts: str | tuple[str, str], console: Console = err) -> None:
    """One line of text; a part may be ``(text, style)``. Notes go to stderr by default."""
    console.print(Text.assemble(*parts), highlight=False)


def as_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


def when(value: str | None) -> str:
    """An ISO time as ``2026-11-23 14:02:11`` (UTC, as the API gives it)."""
    return value.replace("T", " ")[:19] if value else "-"


def state(value: str) -> Text:
    return Text(value, style=STATE_STYLES.get(value, ""))


def size(item: dict[str, Any]) -> str:
    """A task's (or a queue row's) GPUs pool by pool: ``1x4``, ``1x4 + rollout 1x4`` (the trainer's
    pool first, unnamed); ``nnodes x n_gpus_per_node`` where there are no pools (an export)."""
    pools = item.get("pools") or []
    if not pools:
        return f"{item['nnodes']}x{item['n_gpus_per_node']}"
    first, *others = pools
    parts = [f"{first['nnodes']}x{first['n_gpus_per_node']}"]
    parts += [f"{pool['name']} {pool['nnodes']}x{pool['n_gpus_per_node']}" for pool in others]
    return " + ".join(parts)


def cpu_actors(task: dict[str, Any]) -> str:
    """verl's CPU actors beside the pools: ``OneStepTaskRunner 10 CPUs`` ("" for none)."""
    actors = task.get("cpu_actors") or []
    return " + ".join(f"{actor['name']} {actor['cpus']:g}" for actor in actors) + " CPUs" if actors else ""


def cell(value: Any) -> Text:
    if isinstance(value, Text):
        return value
    return Text("-" if value is None or value == "" else str(value))


def table(columns: list[str], rows: list[list[Any]], empty: str) -> None:
    if not rows:
        say(empty)
        return
    grid = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*(cell(value) for value in row))
    out.print(grid)


def result_metrics(metrics: dict[str, float], title: str = "RESULT") -> None:
    """An eval's result: each validation metric verl logged and its last value; nothing for none."""
    if metrics:
        out.print()
        table([title, "VALUE"], [[name, f"{value:g}"] for name, value in metrics.items()], empty="")


def fields(pairs: list[tuple[str, Any]]) -> None:
    """``name  value`` lines, names aligned; empty values are left out."""
    width = max(len(name) for name, _ in pairs)
    for name, value in pairs:
        if value is None or value == "" or value == []:
            continue
        out.print(Text.assemble((f"{name:<{width}}", "bold"), "  ", cell(value)), highlight=False)
