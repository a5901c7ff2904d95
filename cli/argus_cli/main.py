"""The argus command. Every command prints the API's own error message (and the wrong fields)
and exits 3 when the server refuses or cannot be reached: never a traceback."""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.text import Text

from argus_cli import __version__, config, render
from argus_cli import checkpoints as checkpoint_report
from argus_cli import follow as following
from argus_cli import sweeps as sweep_report
from argus_cli import usage as usage_report
from argus_cli.client import ApiError, Client
from argus_cli.render import say

# Exit codes: 0 done; 1 the task (or pipeline) FAILED or was CANCELED (following.EXIT_TASK_FAILED); 2 usage
# (click's own); 3 the server refused or could not be reached.
EXIT_ERROR = 3
STATES = [
    "WAITING",
    "QUEUED",
    "PENDING_RESOURCES",
    "SUBMITTING",
    "SUBMITTED",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "CANCELED",
]
WORKLOADS = ["ppo", "grpo", "sft", "export", "eval"]
# A pipeline document is a mapping with steps:, a sweep document one with base:, grid: or
# random: (a task spec has none of them; tasks.sweeps.document.is_sweep_document). The command
# has no YAML parser (no dependency beyond click, rich and httpx): a top-level key of a block
# mapping starts a line; a flow mapping or JSON names it after its opening brace.
PIPELINE_KEYS = ("steps",)
SWEEP_KEYS = ("base", "grid", "random")

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, fields: dict[str, Any] | None = None) -> None:
    say(("error:", "red"), f" {message}")
    for name, problems in (fields or {}).items():
        for problem in problems if isinstance(problems, list) else [problems]:
            say(f"  {name}: {problem}")
    sys.exit(EXIT_ERROR)


def api_command(func: F) -> F:
    """Turn ApiError and a missing configuration into a message and exit code 3."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ApiError as error:
            hint = " Check ARGUS_TOKEN or run `argus login`." if error.status == 401 else ""
            fail(error.message + hint, error.fields)
        except config.ConfigError as error:
            fail(str(error))

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature


def client() -> Client:
    settings = config.load()
    return Client(settings.url, settings.token)


json_option = click.option("--json", "as_json", is_flag=True, help="Print the API's JSON instead of a table.")
interval_option = click.option(
    "--interval", default=2.0, show_default=True, type=click.FloatRange(min=0.1), help="Seconds between checks."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="argus")
def cli() -> None:
    """Submit and follow training tasks and pipelines on Argus.

    The server and token come from ARGUS_URL and ARGUS_TOKEN, else from `argus login`.
    Exit codes: 0 done, 1 the task (or pipeline) FAILED or was CANCELED (wait, --follow), 2 usage error,
    3 the server refused or could not be reached.
    """


@cli.command()
@click.option("--url", help="The Argus server, e.g. https://argus.example.org.")
@click.option("--token-stdin", is_flag=True, help="Read the token from standard input instead of asking.")
@api_command
def login(url: str | None, token_stdin: bool) -> None:
    """Check a token against the server and save both in your config folder (mode 600)."""
    stored = config.saved()
    url = url or click.prompt("Argus URL", default=stored.get("url") or "http://127.0.0.1:8000")
    if token_stdin:
        token = sys.stdin.readline().strip()
    else:
        token = click.prompt("API token (from the account page)", hide_input=True)
    url = url.rstrip("/")
    me = Client(url, token).get("me")
    path = config.save(config.Config(url=url, token=token))
    say(f"Signed in to {url} as {me['username']}; saved to {path}")


@cli.command()
@click.argument("file", type=click.File("rb"))
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Stream the log with a step bar (a pipeline's steps in turn); exit 0 if it SUCCEEDED, else 1.",
)
@interval_option
@json_option
@api_command
def submit(file: Any, follow: bool, interval: float, as_json: bool) -> None:
    """Submit the task spec FILE (YAML or JSON; - for standard input) and print the new task's id.

    A pipeline document (a mapping with steps:) is submitted as a pipeline: its id is printed,
    and --follow follows each step in turn. A sweep document (a mapping with base:, grid: or
    random:) is submitted as a sweep, as `argus sweep submit` does."""
    api = client()
    content = file.read()
    if has_key(content, PIPELINE_KEYS):
        pipeline = post_document(api, "pipelines", content)
        announce_pipeline(api, pipeline, follow=follow, interval=interval, as_json=as_json)
        return
    if has_key(content, SWEEP_KEYS):
        if follow:
            fail("--follow follows a task or a pipeline; a sweep's trials: argus sweep show ID")
        announce_sweep(post_document(api, "sweeps", content), as_json=as_json)
        return
    task = post_document(api, "tasks", content)
    announce(api, task, follow=follow, interval=interval, as_json=as_json)


def has_key(content: bytes, keys: tuple[str, ...]) -> bool:
    """Whether the document ``content`` is a mapping with one of ``keys`` at its top level
    (PIPELINE_KEYS, SWEEP_KEYS): a pipeline or a sweep rather than a task spec."""
    text = content.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        names = "|".join(map(re.escape, keys))
        return re.search(rf"""^(?:\{{\s*)?(["']?)(?:{names})\1\s*:""", text, re.MULTILINE) is not None
    return isinstance(data, dict) and any(key in data for key in keys)


def announce_pipeline(api: Client, pipeline: dict[str, Any], *, follow: bool, interval: float, as_json: bool) -> None:
    """A new pipeline: its id (alone on stdout, for scripts); then follow its steps if asked."""
    if as_json:
        render.as_json(pipeline)
    else:
        click.echo(pipeline["pipeline_id"])
    if follow:
        ended = following.follow_pipeline(api, pipeline["pipeline_id"], interval=interval)
        sys.exit(following.exit_code(ended))


def post_document(api: Client, endpoint: str, content: bytes) -> dict[str, Any]:
    """POST a document (a task spec, a pipeline, a sweep): JSON as JSON, anything else as YAML.
    JSON is not always YAML: a YAML loader reads JSON's 1e-06 as a string (YAML 1.1 floats have
    a dot) and refuses the tabs `jq --tab` indents with."""
    try:
        json.loads(content)
    except ValueError:
        return api.post(endpoint, content=content, content_type="application/yaml")
    return api.post(endpoint, content=content, content_type="application/json")


def announce_sweep(sweep: dict[str, Any], *, as_json: bool) -> None:
    """A new sweep: its id (alone on stdout, for scripts), and its trials on stderr."""
    if as_json:
        render.as_json(sweep)
        return
    click.echo(sweep["sweep_id"])
    trials = sweep["trials"]
    waiting = sum(1 for trial in trials if trial["state"] == "WAITING")
    plural = "s" if len(trials) != 1 else ""
    say(f"{len(trials)} trial{plural}: {len(trials) - waiting} queued, {waiting} waiting their turn")


def announce(api: Client, task: dict[str, Any], *, follow: bool, interval: float, as_json: bool) -> None:
    """A new task: its id (alone on stdout, for scripts) and warnings; then follow it if asked."""
    if as_json:
        render.as_json(task)
    else:
        click.echo(task["task_id"])
    for warning in task.get("warnings") or []:
        say(("warning:", "yellow"), f" {warning}")
    if follow:
        sys.exit(following.exit_code(following.follow(api, task["task_id"], interval=interval)))


@cli.command(name="ls")
@click.option("--state", type=click.Choice(STATES, case_sensitive=False), help="Only tasks in this state.")
@click.option("--workload", type=click.Choice(WORKLOADS, case_sensitive=False), help="Only this workload.")
@click.option("--limit", "-n", default=50, show_default=True, type=click.IntRange(min=1), help="At most this many.")
@json_option
@api_command
def list_tasks(state: str | None, workload: str | None, limit: int, as_json: bool) -> None:
    """List your tasks (an admin sees everyone's), newest first."""
    rows = client().get_all("tasks", limit=limit, state=state, workload=workload)
    if as_json:
        render.as_json(rows)
        return
    render.table(
        ["TASK", "STATE", "WORKLOAD", "GPUS", "CREATED", "FINISHED", "NOTE"],
        [
            [
                task["task_id"],
                render.state(task["state"]),
                task["workload"],
                render.size(task),
                render.when(task["created_at"]),
                render.when(task["finished_at"]),
                task["error_summary"] or task["pending_reason"],
            ]
            for task in rows
        ],
        empty="No tasks.",
    )


@cli.command()
@click.argument("task_id")
@json_option
@api_command
def show(task_id: str, as_json: bool) -> None:
    """A task: its state, size, times and attempts."""
    task = client().get(f"tasks/{task_id}")
    if as_json:
        render.as_json(task)
        return
    render.fields(
        [
            ("task", task["task_id"]),
            ("state", render.state(task["state"]) + (" (cancel requested)" if task["cancel_requested"] else "")),
            ("stopped", "early, by its sweep" if task["early_stopped"] else None),
            ("user", task["user"]),
            ("sweep", f"{task['sweep_id']} (trial {task['trial_index']})" if task["sweep_id"] else None),
            ("params", ", ".join(f"{key}={value}" for key, value in task["params"].items())),
            ("workload", f"{task['workload']} ({task['kind']}, priority {task['priority']})"),
            ("gpus", f"{render.size(task)} = {task['total_gpus']}"),
            ("cpu actors", render.cpu_actors(task)),
            ("created", render.when(task["created_at"])),
            ("finished", render.when(task["finished_at"]) if task["finished_at"] else None),
            ("next try", render.when(task["next_run_at"]) if task["next_run_at"] else None),
            ("quota", task.get("quota")),  # in_quota or borrowed; none before it ran
            ("waiting", task["pending_reason"]),
            ("error", task["error_summary"]),
            ("warnings", "; ".join(task["warnings"])),
        ]
    )
    render.result_metrics(task.get("result_metrics") or {})
    attempts = task.get("attempts") or []
    if attempts:
        click.echo()
        render.table(
            ["ATTEMPT", "RAY STATUS", "QUOTA", "FAILURE", "EXIT", "NODE", "START", "END"],
            [
                [
                    a["attempt_no"],
                    a["ray_status"],
                    _quota(a),
                    a["failure_kind"],
                    a["exit_code"],
                    a["node_ip"],
                    render.when(a["start_time"]),
                    render.when(a["end_time"]),
                ]
                for a in attempts
            ],
            empty="",
        )


def _quota(attempt: dict[str, Any]) -> str:
    """Whose quota an attempt ran in: "borrowed (vision)", "in_quota (vision)", "in_quota" (no group)."""
    quota, group = attempt.get("quota") or "", attempt.get("group")
    return f"{quota} ({group})" if quota and group else quota


@cli.command()
@click.argument("task_id")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the attempt ends.")
@click.option("--tail", "-n", type=click.IntRange(min=0), help="Only the last N lines.")
@click.option("--attempt", type=click.IntRange(min=1), help="Attempt number (default: the latest).")
@interval_option
@api_command
def logs(task_id: str, follow: bool, tail: int | None, attempt: int | None, interval: float) -> None:
    """The driver log of a task's attempt; with -f, of the one to come if none has started yet."""
    api = client()
    if follow and attempt is None:
        following.wait_for_attempt(api, task_id, interval=interval)
    for line in api.lines(f"tasks/{task_id}/logs", tail=tail, attempt=attempt, follow=1 if follow else None):
        click.echo(line)


@cli.command()
@click.argument("task_id")
@json_option
@api_command
def cancel(task_id: str, as_json: bool) -> None:
    """Cancel a task: at once if it waits, else once Ray has stopped it."""
    task = client().post(f"tasks/{task_id}/cancel")
    if as_json:
        render.as_json(task)
    elif task["state"] == "CANCELED":
        say(f"{task_id}: CANCELED")
    else:
        say(f"{task_id}: stop requested; it becomes CANCELED when Ray has stopped it (argus wait {task_id}).")


@cli.command(name="wait")
@click.argument("task_id")
@interval_option
@json_option
@api_command
def wait_for(task_id: str, interval: float, as_json: bool) -> None:
    """Wait until a task ends: exit 0 if it SUCCEEDED, 1 if it FAILED or was CANCELED."""
    task = following.wait(client(), task_id, interval=interval)
    if as_json:
        render.as_json(task)
    sys.exit(following.exit_code(task))


@cli.command()
@click.argument("task_id")
@click.option("--follow", "-f", is_flag=True, help="Then follow the new task, as submit --follow.")
@interval_option
@json_option
@api_command
def resubmit(task_id: str, follow: bool, interval: float, as_json: bool) -> None:
    """Submit a new task from the spec of TASK_ID, exactly as it was sent."""
    api = client()
    raw = api.get(f"tasks/{task_id}/spec")["raw"]
    task = api.post("tasks", content=raw.encode(), content_type="application/yaml")
    announce(api, task, follow=follow, interval=interval, as_json=as_json)


@cli.command()
@click.option("--limit", "-n", default=100, show_default=True, type=click.IntRange(min=1), help="At most this many.")
@json_option
@api_command
def queue(limit: int, as_json: bool) -> None:
    """Tasks on Ray, then the waiting ones in the scheduler's order (priority, fair share,
    submission), each with why it waits and, when planned, when it should start."""
    rows = client().get_all("queue", limit=limit)
    if as_json:
        render.as_json(rows)
        return
    render.table(
        ["POS", "TASK", "USER", "STATE", "PRIORITY", "GPUS", "SHARE", "REASON"],
        [
            [
                row["position"],
                row["task_id"] or "(another user's)",
                row["user"],
                render.state(row["state"]),
                row["priority"],
                render.size(row),
                row.get("share", ""),
                # The note says when it should start and whom it waits behind.
                "\n".join(text for text in (row["reason"], row.get("note")) if text),
            ]
            for row in rows
        ],
        empty="The queue is empty.",
    )


@cli.command()
@json_option
@api_command
def cluster(as_json: bool) -> None:
    """The Ray cluster as the scheduler last saw it: nodes and free GPUs."""
    state = client().get("cluster")
    if as_json:
        render.as_json(state)
        return
    reachable = ("reachable", "green") if state["reachable"] else ("unreachable", "red")
    say(
        "Ray ",
        reachable,
        "" if state["reachable"] else f" ({state['error']})",
        f", checked {render.when(state['checked_at'])}; GPUs free {state['gpus_free']:g} of {state['gpus_total']:g}",
        console=render.out,
    )
    render.table(
        ["NODE", "IP", "ROLE", "ALIVE", "GPUS FREE", "CPUS FREE"],
        [
            [
                node["node_id"][:12],
                node["ip"],
                "head" if node["is_head"] else "worker",
                "yes" if node["alive"] else Text("no", style="red"),
                f"{node['gpus_free']:g}/{node['gpus_total']:g}",
                f"{node['cpus_free']:g}/{node['cpus_total']:g}",
            ]
            for node in state["nodes"]
        ],
        empty="No nodes seen yet.",
    )


@cli.command()
@click.option("--by", type=click.Choice(["user", "group"]), default="user", show_default=True, help="One row per.")
@click.option("--since", default="30d", show_default=True, help="From: a date (2026-11-01) or a duration back (30d).")
@click.option("--until", default=None, help="Up to: a date or a duration back (default: now).")
@click.option("--csv", "as_csv", is_flag=True, help="Print the API's CSV.")
@json_option
@api_command
def usage(by: str, since: str, until: str | None, as_csv: bool, as_json: bool) -> None:
    """GPU-hours by user or group: in quota, borrowed, lost to preemptions and node failures,
    with tasks and their mean wait. Yours and your group's; an admin's: everyone's."""
    params = {"by": by, "since": since, "until": until}
    if as_csv:
        click.echo(client().text("usage", format="csv", **params), nl=False)
        return
    report = client().get("usage", **params)
    if as_json:
        render.as_json(report)
        return
    usage_report.show(report)


@cli.group()
def pipeline() -> None:
    """Your pipelines: several tasks submitted as one document (argus submit FILE with steps:)."""


def steps_note(steps: list[dict[str, Any]]) -> str:
    """``2/3 succeeded; grpo RUNNING``: how far it is, and the steps not done."""
    done = sum(1 for step in steps if step["state"] == "SUCCEEDED")
    rest = [f"{step['name']} {step['state']}" for step in steps if step["state"] != "SUCCEEDED"]
    return "; ".join([f"{done}/{len(steps)} succeeded", *rest[:3]]) + ("; …" if len(rest) > 3 else "")


@pipeline.command(name="ls")
@click.option("--limit", "-n", default=50, show_default=True, type=click.IntRange(min=1), help="At most this many.")
@json_option
@api_command
def pipeline_list(limit: int, as_json: bool) -> None:
    """List your pipelines (an admin sees everyone's), newest first."""
    rows = client().get_all("pipelines", limit=limit)
    if as_json:
        render.as_json(rows)
        return
    render.table(
        ["PIPELINE", "NAME", "STATE", "USER", "CREATED", "FINISHED", "STEPS"],
        [
            [
                row["pipeline_id"],
                row["name"],
                render.state(row["state"]),
                row["user"],
                render.when(row["created_at"]),
                render.when(row["finished_at"]),
                steps_note(row["steps"]),
            ]
            for row in rows
        ],
        empty="No pipelines.",
    )


def show_pipeline(data: dict[str, Any]) -> None:
    render.fields(
        [
            ("pipeline", data["pipeline_id"]),
            ("name", data["name"]),
            ("state", render.state(data["state"])),
            ("user", data["user"]),
            ("created", render.when(data["created_at"])),
            ("finished", render.when(data["finished_at"]) if data["finished_at"] else None),
        ]
    )
    click.echo()
    render.table(
        ["STEP", "TASK", "STATE", "WORKLOAD", "AFTER", "QUEUED", "FINISHED", "NOTE"],
        [
            [
                step["name"],
                step["task_id"],
                render.state(step["state"]),
                step["workload"],
                ", ".join([*step["after"], *(f"{name} (any end)" for name in step["after_any"])]),
                render.when(step["queued_at"]),
                render.when(step["finished_at"]),
                step["reason"],
            ]
            for step in data["steps"]
        ],
        empty="",
    )
    for step in data["steps"]:
        render.result_metrics(step.get("result_metrics") or {}, f"RESULT OF {step['name'].upper()}")


@pipeline.command(name="show")
@click.argument("pipeline_id")
@json_option
@api_command
def pipeline_show(pipeline_id: str, as_json: bool) -> None:
    """A pipeline: its state, and each step's task, state and why it waits or how it ended."""
    data = client().get(f"pipelines/{pipeline_id}")
    if as_json:
        render.as_json(data)
        return
    show_pipeline(data)


@pipeline.command(name="cancel")
@click.argument("pipeline_id")
@json_option
@api_command
def pipeline_cancel(pipeline_id: str, as_json: bool) -> None:
    """Cancel every step that has not ended: at once if it waits, else once Ray has stopped it."""
    data = client().post(f"pipelines/{pipeline_id}/cancel")
    if as_json:
        render.as_json(data)
    elif data["state"] == "CANCELED":
        say(f"{pipeline_id}: CANCELED")
    else:
        say(f"{pipeline_id}: canceled; its steps on Ray become CANCELED when Ray has stopped them.")


@pipeline.command(name="retry")
@click.argument("pipeline_id")
@click.option("--follow", "-f", is_flag=True, help="Then follow its steps, as submit --follow.")
@interval_option
@json_option
@api_command
def pipeline_retry(pipeline_id: str, follow: bool, interval: float, as_json: bool) -> None:
    """Run an ended pipeline again: new tasks for the steps that did not succeed and those after
    them; the steps that succeeded are reused, their outputs handed on as before."""
    api = client()
    data = api.post(f"pipelines/{pipeline_id}/retry")
    if as_json:
        render.as_json(data)
    else:
        again = [step["name"] for step in data["steps"] if step["state"] != "SUCCEEDED"]
        say(f"{pipeline_id}: RUNNING again; new tasks for {', '.join(again)}")
    if follow:
        sys.exit(following.exit_code(following.follow_pipeline(api, pipeline_id, interval=interval)))


@cli.group()
def sweep() -> None:
    """Your sweeps: a base spec run over a grid (or random samples) of parameters, each trial a task."""


@sweep.command(name="submit")
@click.argument("file", type=click.File("rb"))
@json_option
@api_command
def sweep_submit(file: Any, as_json: bool) -> None:
    """Submit the sweep document FILE (YAML or JSON; - for standard input) and print its id."""
    announce_sweep(post_document(client(), "sweeps", file.read()), as_json=as_json)


@sweep.command(name="ls")
@click.option("--limit", "-n", default=50, show_default=True, type=click.IntRange(min=1), help="At most this many.")
@json_option
@api_command
def sweep_list(limit: int, as_json: bool) -> None:
    """List your sweeps (an admin sees everyone's), newest first."""
    rows = client().get_all("sweeps", limit=limit)
    if as_json:
        render.as_json(rows)
        return
    render.table(
        ["SWEEP", "NAME", "STATE", "USER", "TRIALS", "BEST", "CREATED", "FINISHED"],
        [
            [
                row["sweep_id"],
                row["name"],
                render.state(row["state"]),
                row["user"],
                sweep_report.progress(row["trials"]),
                row["best_trial"],
                render.when(row["created_at"]),
                render.when(row["finished_at"]),
            ]
            for row in rows
        ],
        empty="No sweeps.",
    )


@sweep.command(name="show")
@click.argument("sweep_id")
@json_option
@api_command
def sweep_show(sweep_id: str, as_json: bool) -> None:
    """A sweep: its state, and each trial's params, state, last step and values of the metric."""
    data = client().get(f"sweeps/{sweep_id}")
    if as_json:
        render.as_json(data)
        return
    sweep_report.show(data)


@sweep.command(name="cancel")
@click.argument("sweep_id")
@json_option
@api_command
def sweep_cancel(sweep_id: str, as_json: bool) -> None:
    """Cancel every trial that has not ended: at once if it waits, else once Ray has stopped it."""
    data = client().post(f"sweeps/{sweep_id}/cancel")
    if as_json:
        render.as_json(data)
    elif data["state"] == "RUNNING":
        say(f"{sweep_id}: canceled; its trials on Ray become CANCELED when Ray has stopped them.")
    elif data["state"] == "SUCCEEDED":
        # A sweep with a trial that succeeded ends SUCCEEDED, canceled or not.
        say(f"{sweep_id}: SUCCEEDED (a trial had succeeded); every trial not ended is canceled")
    else:
        say(f"{sweep_id}: {data['state']}")


@cli.group()
def webhook() -> None:
    """Your webhooks: Argus POSTs signed JSON to them when your tasks end or are retried."""


EVENTS = [
    "SUCCEEDED",
    "FAILED",
    "CANCELED",
    "RETRYING",
    "PIPELINE_SUCCEEDED",
    "PIPELINE_FAILED",
    "SWEEP_SUCCEEDED",
    "SWEEP_FAILED",
]


@webhook.command(name="add")
@click.argument("url")
@click.option(
    "--event",
    "events",
    multiple=True,
    type=click.Choice(EVENTS, case_sensitive=False),
    help="An event that fires it (repeat the option); default: SUCCEEDED, FAILED and CANCELED.",
)
@json_option
@api_command
def webhook_add(url: str, events: tuple[str, ...], as_json: bool) -> None:
    """Register URL; prints the secret that signs its deliveries (shown this once)."""
    hook = client().post("me/webhooks", json={"url": url, "events": list(events) or EVENTS[:3]})
    if as_json:
        render.as_json(hook)
        return
    say(f"Webhook {hook['id']} on {', '.join(hook['events'])}. Its secret, shown this once:")
    click.echo(hook["secret"])


@webhook.command(name="ls")
@json_option
@api_command
def webhook_list(as_json: bool) -> None:
    """List your webhooks."""
    rows = client().get_all("me/webhooks")
    if as_json:
        render.as_json(rows)
        return
    render.table(
        ["ID", "URL", "EVENTS", "ADDED"],
        [[hook["id"], hook["url"], ",".join(hook["events"]), render.when(hook["created_at"])] for hook in rows],
        empty="No webhooks.",
    )


@webhook.command(name="rm")
@click.argument("webhook_id", type=int)
@api_command
def webhook_remove(webhook_id: int) -> None:
    """Delete a webhook: nothing more is sent to it."""
    client().delete(f"me/webhooks/{webhook_id}")
    say(f"Webhook {webhook_id} deleted.")


@webhook.command(name="deliveries")
@click.argument("webhook_id", type=int)
@click.option("--limit", "-n", default=20, show_default=True, type=click.IntRange(min=1), help="At most this many.")
@json_option
@api_command
def webhook_deliveries(webhook_id: int, limit: int, as_json: bool) -> None:
    """A webhook's latest deliveries: status, tries, last answer."""
    rows = client().get_all(f"me/webhooks/{webhook_id}/deliveries", limit=limit)
    if as_json:
        render.as_json(rows)
        return
    render.table(
        ["TASK", "EVENT", "STATUS", "TRIES", "LAST ANSWER", "NEXT TRY"],
        [
            [
                row["task_id"],
                row["event_name"],
                row["status"],
                row["attempts"],
                row["error"] or (f"HTTP {row['response_code']}" if row["response_code"] else ""),
                render.when(row["next_try_at"]) if row["status"] == "PENDING" else "",
            ]
            for row in rows
        ],
        empty="Nothing sent yet.",
    )


@cli.group()
def secret() -> None:
    """Your secrets: keys your tasks name in their spec (secrets: [WANDB_API_KEY]) and get as
    environment variables. Values are never shown again, by any command or page."""


@secret.command(name="set")
@click.argument("name")
@api_command
def secret_set(name: str) -> None:
    """Set secret NAME (e.g. WANDB_API_KEY; the same name again replaces it). The value comes from
    standard input when it is not a terminal (`argus secret set HF_TOKEN < token.txt`), else from a
    hidden prompt: never from the command line, which other users of the machine can read."""
    if sys.stdin.isatty():
        value = click.prompt(f"Value of {name}", hide_input=True)
    else:
        value = sys.stdin.read()
        # The line end `echo` or a file adds is not part of the value.
        value = value[:-1] if value.endswith("\n") else value
        value = value[:-1] if value.endswith("\r") else value
    created = client().post("me/secrets", json={"name": name, "value": value})
    say(f"Secret {created['name']} saved. Name it in a spec: secrets: [{created['name']}]")


@secret.command(name="ls")
@json_option
@api_command
def secret_list(as_json: bool) -> None:
    """List your secrets' names and when they were set (never their values)."""
    rows = client().get("me/secrets")
    if as_json:
        render.as_json(rows)
        return
    render.table(
        ["NAME", "CREATED", "UPDATED"],
        [[row["name"], render.when(row["created_at"]), render.when(row["updated_at"])] for row in rows],
        empty="No secrets.",
    )


@secret.command(name="rm")
@click.argument("name")
@api_command
def secret_remove(name: str) -> None:
    """Delete secret NAME: tasks that name it fail their next attempt."""
    client().delete(f"me/secrets/{name}")
    say(f"Secret {name} deleted.")


@cli.group()
def checkpoints() -> None:
    """A task's checkpoints (global_step_N folders), their sizes, and deleting a finished task's."""


@checkpoints.command(name="ls")
@click.argument("task_id")
@json_option
@api_command
def checkpoint_list(task_id: str, as_json: bool) -> None:
    """List TASK_ID's checkpoints, oldest first, with their sizes and who needs each."""
    listing = client().get(f"tasks/{task_id}/checkpoints")
    if as_json:
        render.as_json(listing)
        return
    checkpoint_report.show(task_id, listing)


@checkpoints.command(name="rm")
@click.argument("task_id")
@click.argument("step", type=click.IntRange(min=0))
@api_command
def checkpoint_remove(task_id: str, step: int) -> None:
    """Delete checkpoint STEP of finished task TASK_ID (refused while something needs it)."""
    freed = client().delete(f"tasks/{task_id}/checkpoints/{step}")
    say(f"Deleted global_step_{step} of {task_id}: {checkpoint_report.human_bytes(freed['bytes'])} freed.")


def main() -> None:
    cli()
