"""`argus sweep show|ls`: a sweep and its trials, as GET /api/v2/sweeps[/ID] gives them."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from argus_cli import render


def short_names(keys: list[str]) -> dict[str, str]:
    """Each parameter's column head: the last part of its dotted key (``lr``), the whole key
    where two would read the same (as the sweep's page heads them)."""
    last = {key: key.rsplit(".", 1)[-1] for key in keys}
    names = list(last.values())
    return {key: short if names.count(short) == 1 else key for key, short in last.items()}


def value(number: float | None) -> str:
    return "-" if number is None else f"{number:.4g}"


def progress(trials: list[dict[str, Any]]) -> str:
    """``4/6 ended, 2 stopped early``."""
    ended = sum(1 for trial in trials if trial["state"] in render.TERMINAL)
    stopped = sum(1 for trial in trials if trial["early_stopped"])
    return f"{ended}/{len(trials)} ended" + (f", {stopped} stopped early" if stopped else "")


def show(data: dict[str, Any]) -> None:
    trials = data["trials"]
    best = data["best_trial"]  # the best trial's task id
    early = data["early_stop"]
    render.fields(
        [
            ("sweep", data["sweep_id"]),
            ("name", data["name"]),
            ("state", render.state(data["state"])),
            ("user", data["user"]),
            ("trials", progress(trials)),
            ("at once", data["max_concurrent"]),
            ("metric", f"{data['metric']} ({data['mode']})" if data["metric"] else None),
            ("rungs", f"steps {early['min_steps']} × {early['eta']}^k" if early else None),
            ("best", best),
            ("created", render.when(data["created_at"])),
            ("finished", render.when(data["finished_at"]) if data["finished_at"] else None),
        ]
    )
    if not trials:
        return
    keys = list(trials[0]["params"])
    heads = short_names(keys)
    render.out.print()
    render.table(
        ["#", "TASK", *(heads[key].upper() for key in keys), "STATE", "STEP", "BEST", "LAST"],
        [
            [
                trial["trial_index"],
                Text(f"{trial['task_id']} *", style="bold") if trial["task_id"] == best else trial["task_id"],
                *(trial["params"].get(key) for key in keys),
                Text.assemble(render.state(trial["state"]), " (stopped early)" if trial["early_stopped"] else ""),
                trial["last_step"],
                value(trial["best_value"]),
                value(trial["last_value"]),
            ]
            for trial in trials
        ],
        empty="",
    )
    if best:
        render.say("* the best trial")
