"""Why an attempt failed, read from Ray's job message and the tail of the driver log.

The kind comes from the error that ended the run, never from a word found somewhere in the log:
every real verl 0.9.1 log carries warnings such as
``UserWarning: torchtitan engine is not available: ModuleNotFoundError("No module named 'torchtitan'")``
that say nothing about why the run failed. Real logs to judge this on: tests/fixtures/verl/.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TypeGuard

from tasks.choices import FailureKind
from tasks.logs.lines import ACTOR_PREFIX, clean_lines, strip_ansi

# verl's fail-fast check (ResourcePoolManager._check_resource_available), in any of the
# forms it reaches us: a "(TaskRunner pid=N)" prefix, a RayTaskError(ValueError) wrapper,
# float counts, with or without a trailing period.
INSUFFICIENT = re.compile(
    r"Total available GPUs\s+(?P<available>\d+(?:\.\d+)?)\s+is less than total desired GPUs\s+"
    r"(?P<desired>\d+(?:\.\d+)?)"
)
# The line closing a traceback, at the start of a line: "ValueError: …", a bare "AssertionError",
# "ray.exceptions.RayTaskError(ValueError): …", "hydra.errors.ConfigCompositionException: …".
# Anchored, so an exception named inside a warning ("UserWarning: … ModuleNotFoundError(…)") never
# counts; a bare "Error: …" (Ray's autoscaler) is no exception either.
EXCEPTION = re.compile(
    r"^(?P<name>(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)|Exception))"
    r"(?:\((?P<inner>[\w.]+)\))?(?::(?: (?P<text>.*))?)?$"
)
# Hydra prints its own errors without a class name (run_and_report writes str(ex) of a
# CompactHydraException), then a blank line and "Set the environment variable HYDRA_FULL_ERROR=1 …".
HYDRA_ERROR = re.compile(
    r"^(?:Could not (?:override|append to config|delete from config|load) |Error (?:merging|parsing) override|"
    r"Cannot find primary config|Key '[^']*' is not in struct)"
)
# argparse: "usage: prog …" then "prog: error: unrecognized arguments: …". Only after a usage line,
# so "GPU memory usage: 3 GB" or "foo: error: bar" in passing is no error.
USAGE = re.compile(r"^usage: ")
ARGPARSE_ERROR = re.compile(r"^[^\s:][^:]*: error: .+$")
# Shutdown noise after the real error: "Exception ignored in: <function …>" and its traceback.
IGNORED = re.compile(r"^Exception ignored in\b")
# A traceback's frame or carets, or the words that start one: never the message of the exception
# before them (which may run on in tab-indented lines of Ray's).
FRAME = re.compile(
    r"^(?:\s+File \"|\s+\^+$|Traceback \(most recent call last\):|During handling of the above|The above exception)"
)
# How a traceback names Ray's own exceptions (ray/exceptions.py): module and all.
RAY_EXCEPTIONS = "ray.exceptions."

# What the user asked for is wrong: running it again fails the same way.
USER_EXCEPTIONS = frozenset(
    {
        "FileNotFoundError",
        "ModuleNotFoundError",
        "ConfigCompositionException",
        "MissingConfigException",
        "OverrideParseException",
    }
)
# Hydra's and OmegaConf's words for a bad override or key, and verl's load_module wrapping whatever
# the user's own module (a custom dataset, reward function) raised while being imported.
USER_TEXT = re.compile(r"Could not override '|Key '[^']*' is not in struct|^Error loading module from module_path=")


@dataclass(frozen=True)
class FinalError:
    """The error that ended a run: its line as a person should read it, and its exception name
    ("" for Hydra's and argparse's unnamed errors). ``ray``: the exception is Ray's own, as a
    traceback names it (``ray.exceptions.ActorDiedError: …``, ``ray.exceptions.RayTaskError(X): …``),
    not a bare name anyone can print; ``detail``: the lines of its message that follow it, from
    the same process (Ray's messages run on: ``\tclass_name: …``, ``The actor died because its
    node has died. Node Id: …``)."""

    line: str
    name: str
    user_error: bool
    ray: bool = False
    detail: str = ""


def final_error(message: str, log_tail: str) -> FinalError | None:
    """The error that ended the run: the last one in Ray's message (which, for a failed entrypoint,
    quotes the log's end), else the last one in the log."""
    return _last_error(message) or _last_error(log_tail)


def _last_error(text: str) -> FinalError | None:
    """The last traceback's closing exception, Hydra's compact error or argparse's error."""
    found: FinalError | None = None
    detail: list[str] = []  # the lines that follow the last exception, while its message runs on
    source = ""  # the Ray prefix of that exception's line: its process
    usage_seen = ignoring = in_hydra_block = following = False
    for raw in strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        prefix = ACTOR_PREFIX.match(raw)
        line = clean_lines(raw, keep_indent=True)[0]
        if not line.strip():
            in_hydra_block = ignoring = following = False
            continue
        if IGNORED.match(line):
            ignoring = True
            following = False
            continue
        if USAGE.match(line):
            usage_seen = True
            continue
        match = EXCEPTION.match(line)
        if following and not match and (prefix.group(0) if prefix else "") == source and not FRAME.match(line):
            detail.append(line)
            continue
        following = False
        if match:
            in_hydra_block = False
            if ignoring:
                ignoring = False
                continue
            name = (match.group("inner") or match.group("name")).rsplit(".", 1)[-1]
            user = name in USER_EXCEPTIONS or bool(USER_TEXT.search(match.group("text") or ""))
            found = FinalError(line, name, user, ray=match.group("name").startswith(RAY_EXCEPTIONS))
            detail, source, following = [], prefix.group(0) if prefix else "", True
        elif HYDRA_ERROR.match(line):
            # "Could not override 'x'." then its cause "Key 'x' is not in struct": one error, and
            # its first line says it best.
            if not in_hydra_block:
                found, detail = FinalError(line, "", True), []
                in_hydra_block = True
        elif usage_seen and ARGPARSE_ERROR.match(line):
            found, detail = FinalError(line, "", True), []
    if found is not None and detail:
        found = replace(found, detail="\n".join(detail))
    return found


def classify(message: str, log_tail: str, error_type: str = "") -> FailureKind:
    """1. verl's fail-fast message anywhere, or Ray's word that the job never found room
    (``error_type``, SHORTAGE_ERROR_TYPES): INSUFFICIENT_RESOURCES (retried when room frees up).
    2. The error that ended the run (``final_error``) is the user's (a missing file or module, a bad
       Hydra override, a bad argument): USER_ERROR, never retried.
    3. Any other error: RUNTIME_ERROR. 4. No error at all: UNKNOWN."""
    text = strip_ansi(f"{message}\n{log_tail}")
    # verl's fail-fast check means "try again later", wherever it shows.
    if INSUFFICIENT.search(text) or error_type in SHORTAGE_ERROR_TYPES:
        return FailureKind.INSUFFICIENT_RESOURCES
    final = final_error(message, log_tail)
    if final is None:
        # No error at all (a SIGKILL, an empty log): nothing to say what went wrong.
        return FailureKind.UNKNOWN
    return FailureKind.USER_ERROR if final.user_error else FailureKind.RUNTIME_ERROR


# Ray's verdict (JobDetails.error_type, JobErrorType) that a job's supervisor actor died, and the
# driver under it: of its node's death when Ray's message says so or Ray lists its node dead (the
# actor can die of other things too: Ray's memory monitor, a signal from the user's own driver).
SUPERVISOR_DIED = "JOB_SUPERVISOR_ACTOR_DIED"
# Ray's verdicts that a job never started for want of room: Ray fails a job still PENDING after
# RAY_JOB_START_TIMEOUT_SECONDS (job_manager._monitor_job_internal), when no node could take its
# supervisor, which asks for the entrypoint's resources (worker_node, an export's CPUs) and says
# so ("… aren't available on the cluster"). Nothing of the user's ran and no node died: the
# cluster had no room, so the task waits for room as after verl's fail-fast, uncounted.
SHORTAGE_ERROR_TYPES = frozenset({"JOB_SUPERVISOR_ACTOR_START_TIMEOUT"})
# Ray's exceptions for work lost with its process or node (ray/exceptions.py). Alone they may be a
# crash (an actor's os._exit gives ActorDiedError too): they mean a node death when Ray's own
# message of them says so, or when Ray lists one of the attempt's nodes as dead.
NODE_EXCEPTIONS = frozenset(
    {
        "ActorDiedError",
        "NodeDiedError",
        "WorkerCrashedError",
        "ActorUnavailableError",
        "OwnerDiedError",
        "ObjectLostError",
    }
)
# The GCS's words when an actor's node died (gcs_server: "The actor died because its node has died.
# Node Id: 5f3c…"), in ActorDiedError's message and in the supervisor's. Read only where Ray wrote
# them, never anywhere in the log: a program may print anything.
RAY_NODE_DIED = re.compile(r"The actor died because its node has died\. Node Id: (?P<id>[0-9a-f]{8,})")


@dataclass(frozen=True)
class NodeDeath:
    """A run ended by the death of a node it ran on: the line to read, and the nodes, named."""

    line: str
    nodes: tuple[str, ...]


def node_name(node_id: str, ip: str = "") -> str:
    return f"{ip} ({node_id[:8]})" if ip else node_id[:8]


def node_death(error_type: str, message: str, log_tail: str, dead: Mapping[str, str]) -> NodeDeath | None:
    """Whether the run ended because a node died, by Ray's own account: its status, its node
    table and its exceptions, never text the program printed.

    ``dead``: the nodes the attempt really ran on (tasks.scheduler.sync._failed says which) that
    Ray lists as dead, {node_id: ip}.
    1. Ray's job supervisor died (error_type), and Ray's message says of its node's death, or one
       of the attempt's nodes is dead.
    2. The run ended on one of Ray's lost-work exceptions (``ray.exceptions.…``), and the message
       Ray wrote with it says its node died (NodeDiedError says so by its name).
    3. One of its nodes is dead and the run ended on no error of the user's (a training rank that
       lost its peer fails with whatever NCCL says).
    """
    final = final_error(message, log_tail)
    supervisor = error_type == SUPERVISOR_DIED
    # Where Ray's own words are: the supervisor's message is Ray's; otherwise the message of the
    # final exception, when that is Ray's.
    words = strip_ansi(message if supervisor else (final.detail if _ray_lost(final) else ""))
    named = dict(dead)
    for match in RAY_NODE_DIED.finditer(words):
        named.setdefault(match["id"], "")
    nodes = tuple(sorted(node_name(node, ip) for node, ip in named.items()))
    where = ", ".join(nodes)
    said = bool(RAY_NODE_DIED.search(words)) or (_ray_lost(final) and final.name == "NodeDiedError")
    if supervisor and (said or dead):
        what = f"its Ray job supervisor died ({where or 'its node is gone'}): {key_error_line(message, '')}"
        return NodeDeath(what[:500], nodes)
    user_error = final is not None and final.user_error
    if said or (dead and not user_error and not INSUFFICIENT.search(strip_ansi(f"{message}\n{log_tail}"))):
        line = final.line if final is not None else "the job ended with no error of its own"
        return NodeDeath(f"node {where or '(unnamed)'} died: {line}"[:500], nodes)
    return None


def _ray_lost(final: FinalError | None) -> TypeGuard[FinalError]:
    """The run ended on one of Ray's own lost-work exceptions."""
    return final is not None and final.ray and final.name in NODE_EXCEPTIONS


def lost_work(message: str, log_tail: str) -> bool:
    """The run ended on one of Ray's lost-work exceptions: a node may have died, though Ray may
    not have said so yet (its health checks take seconds to tens of seconds; a caller whose peer
    vanished hears "Connection refused" at once, tests/standin/logs/node_died.log)."""
    return _ray_lost(final_error(message, log_tail))


def key_error_line(message: str, log_tail: str) -> str:
    """The error that ended the run, the line a person should read first (the one ``classify``
    judged by); without one, the last line of Ray's message or else of the log."""
    final = final_error(message, log_tail)
    if final is not None:
        return final.line[:500]
    for text in (message, log_tail):
        lines = [line.strip() for line in clean_lines(text, keep_indent=True) if line.strip()]
        if lines:
            return lines[-1][:500]
    return ""


def trim(text: str, limit: int = 4000) -> str:
    """Ray's job messages can carry whole tracebacks: keep the end, where the cause is."""
    text = strip_ansi(text)
    return text if len(text) <= limit else "…" + text[-limit:]
