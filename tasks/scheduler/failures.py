"""Why an attempt failed, read from Ray's job message and the tail of the driver log.

The kind comes from the error that ended the run, never from a word found somewhere in the log:
every real verl 0.9.1 log carries warnings such as
``UserWarning: torchtitan engine is not available: ModuleNotFoundError("No module named 'torchtitan'")``
that say nothing about why the run failed. Real logs to judge this on: tests/fixtures/verl/.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tasks.logs.lines import clean_lines, strip_ansi
from tasks.models import FailureKind

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
    ("" for Hydra's and argparse's unnamed errors)."""

    line: str
    name: str
    user_error: bool


def final_error(message: str, log_tail: str) -> FinalError | None:
    """The error that ended the run: the last one in Ray's message (which, for a failed entrypoint,
    quotes the log's end), else the last one in the log."""
    return _last_error(message) or _last_error(log_tail)


def _last_error(text: str) -> FinalError | None:
    """The last traceback's closing exception, Hydra's compact error or argparse's error."""
    found: FinalError | None = None
    usage_seen = ignoring = in_hydra_block = False
    for line in clean_lines(text, keep_indent=True):
        if not line.strip():
            in_hydra_block = ignoring = False
            continue
        if IGNORED.match(line):
            ignoring = True
            continue
        if USAGE.match(line):
            usage_seen = True
            continue
        match = EXCEPTION.match(line)
        if match:
            in_hydra_block = False
            if ignoring:
                ignoring = False
                continue
            name = (match.group("inner") or match.group("name")).rsplit(".", 1)[-1]
            user = name in USER_EXCEPTIONS or bool(USER_TEXT.search(match.group("text") or ""))
            found = FinalError(line, name, user)
        elif HYDRA_ERROR.match(line):
            # "Could not override 'x'." then its cause "Key 'x' is not in struct": one error, and
            # its first line says it best.
            if not in_hydra_block:
                found = FinalError(line, "", True)
                in_hydra_block = True
        elif usage_seen and ARGPARSE_ERROR.match(line):
            found = FinalError(line, "", True)
    return found


def classify(message: str, log_tail: str) -> FailureKind:
    """1. verl's fail-fast message anywhere: INSUFFICIENT_RESOURCES (retried when GPUs free up).
    2. The error that ended the run (``final_error``) is the user's (a missing file or module, a bad
       Hydra override, a bad argument): USER_ERROR, never retried.
    3. Any other error: RUNTIME_ERROR. 4. No error at all: UNKNOWN."""
    text = strip_ansi(f"{message}\n{log_tail}")
    # verl's fail-fast check means "try again later", wherever it shows.
    if INSUFFICIENT.search(text):
        return FailureKind.INSUFFICIENT_RESOURCES
    final = final_error(message, log_tail)
    if final is None:
        # No error at all (a SIGKILL, an empty log): nothing to say what went wrong.
        return FailureKind.UNKNOWN
    return FailureKind.USER_ERROR if final.user_error else FailureKind.RUNTIME_ERROR


# Ray's own verdicts that a job's node went away (JobDetails.error_type, JobErrorType): its
# supervisor actor (and the driver under it) died with its node, or could not start on it.
NODE_ERROR_TYPES = frozenset({"JOB_SUPERVISOR_ACTOR_DIED", "JOB_SUPERVISOR_ACTOR_START_TIMEOUT"})
# Ray's exceptions for work lost with its process or node (ray/exceptions.py). Alone they may be a
# crash (an actor's os._exit gives ActorDiedError too): they mean a node death when Ray's words
# say so, or when Ray lists one of the attempt's nodes as dead.
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
# ActorDiedError's context when the GCS saw the node go ("The actor died because its node has
# died. Node Id: 5f3c…"), and NodeDiedError's.
NODE_DIED = re.compile(r"its node has died|NodeDiedError|node \S+ (?:has )?died", re.IGNORECASE)
NODE_ID = re.compile(r"Node Id: (?P<id>[0-9a-f]{8,})")


@dataclass(frozen=True)
class NodeDeath:
    """A run ended by the death of a node it ran on: the line to read, and the nodes, named."""

    line: str
    nodes: tuple[str, ...]


def node_name(node_id: str, ip: str = "") -> str:
    return f"{ip} ({node_id[:8]})" if ip else node_id[:8]


def node_death(error_type: str, message: str, log_tail: str, dead: Mapping[str, str]) -> NodeDeath | None:
    """Whether the run ended because a node died, by Ray's own account.

    ``dead``: the attempt's nodes (its driver's, its placement groups') that Ray lists as dead,
    {node_id: ip}.
    1. Ray's error_type says the job's supervisor died or never started: its node went.
    2. The run ended on one of Ray's lost-work exceptions, and Ray's words or its node table say
       a node died.
    3. One of its nodes is dead and the run ended on no error of the user's (a training rank that
       lost its peer fails with whatever NCCL says).
    """
    final = final_error(message, log_tail)
    text = strip_ansi(f"{message}\n{log_tail}")
    named = dict(dead)
    for match in NODE_ID.finditer(text):
        named.setdefault(match["id"], "")
    nodes = tuple(sorted(node_name(node, ip) for node, ip in named.items()))
    where = ", ".join(nodes)
    if error_type in NODE_ERROR_TYPES:
        what = "its Ray job supervisor died" if error_type.endswith("_DIED") else "its Ray job supervisor never started"
        return NodeDeath(f"{what} ({where or 'its node is gone'}): {key_error_line(message, '')}"[:500], nodes)
    said = final is not None and final.name in NODE_EXCEPTIONS and (bool(dead) or bool(NODE_DIED.search(text)))
    if said or (dead and not (final is not None and final.user_error) and not INSUFFICIENT.search(text)):
        line = final.line if final is not None else "the job ended with no error of its own"
        return NodeDeath(f"node {where or '(unnamed)'} died: {line}"[:500], nodes)
    return None


def lost_work(message: str, log_tail: str) -> bool:
    """The run ended on one of Ray's lost-work exceptions: a node may have died, though Ray may
    not have said so yet (its health checks take seconds to tens of seconds; a caller whose peer
    vanished hears "Connection refused" at once, tests/standin/logs/node_died.log)."""
    final = final_error(message, log_tail)
    return final is not None and final.name in NODE_EXCEPTIONS


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
