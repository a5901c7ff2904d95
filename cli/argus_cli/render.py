"""How data looks in a terminal: rich tables, and plain JSON for --json."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELED")
STATE_STYLES = {"SUCCEEDED": "green", "FAILED": "red", "CANCELED": "yellow", "RUNNING": "cyan"}

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def as_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def when(value: str | None) -> str:
    """An ISO time as ``2026-11-23 14:02:11`` (UTC, as the API gives it)."""
    return value.replace("T", " ")[:19] if value else "-"


def state(value: str) -> str:
    style = STATE_STYLES.get(value)
    return f"[{style}]{value}[/]" if style else value


def table(columns: list[str], rows: list[list[Any]], empty: str) -> None:
    if not rows:
        err.print(empty)
        return
    grid = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*("-" if cell is None or cell == "" else str(cell) for cell in row))
    out.print(grid)


def fields(pairs: list[tuple[str, Any]]) -> None:
    width = max(len(name) for name, _ in pairs)
    for name, value in pairs:
        if value is None or value == "" or value == []:
            continue
        out.print(f"[bold]{name:<{width}}[/]  {value}", highlight=False)
