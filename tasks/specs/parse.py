"""Task specs: parse the YAML a user submits, validate it, and resolve it (SPEC §3).

`parse_spec` is the only entry point. It reads the document (tasks.specs.yaml_load), checks each
key the table declares (tasks.specs.keys, tasks.specs.checks, tasks.specs.rules) and collects
every problem it finds into one SpecError, keyed by field, so a user fixes a spec in one round
trip rather than one error at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.choices import Workload
from tasks.specs import pools
from tasks.specs.advanced import command_argv
from tasks.specs.checks import Checker
from tasks.specs.errors import SpecError
from tasks.specs.keys import SPEC_KEY, SPEC_KEYS, check_known
from tasks.specs.resolved import ResolvedSpec
from tasks.specs.yaml_load import load_document


@dataclass(frozen=True)
class ParsedSpec:
    """A valid spec: the text as sent, its resolved value and the warnings for its author;
    ``model_fields()`` gives every Task field it sets."""

    raw: str
    resolved: ResolvedSpec
    warnings: list[str]

    @property
    def extra_pools(self) -> tuple[pools.Pool, ...]:
        """verl's resource pools besides the trainer's (nnodes x n_gpus_per_node), read from an
        advanced command (tasks.specs.pools); a basic spec's command starts only the trainer's."""
        read = command_argv(self.resolved.command) if self.resolved.command is not None else None
        return tuple(pools.command_pools(*read)[0]) if read else ()

    @property
    def cpu_actors(self) -> tuple[pools.Actor, ...]:
        """verl's CPU actors an advanced command's module starts beside its pools."""
        read = command_argv(self.resolved.command) if self.resolved.command is not None else None
        return pools.command_actors(read[0]) if read else ()

    @property
    def pools(self) -> list[pools.Pool]:
        """Every pool, the trainer's first (as Task.pools)."""
        return pools.task_pools(self.resolved.nnodes, self.resolved.n_gpus_per_node, self.extra_pools)

    @property
    def total_gpus(self) -> int:
        """Every pool's GPUs: what the task holds on the cluster."""
        return pools.total_gpus(self.pools)

    def model_fields(self) -> dict[str, Any]:
        """The Task fields this spec sets: each key's own (by the table), the text, the result and
        the pools."""
        return {
            **self.resolved.task_fields(),
            "spec_raw": self.raw,
            "spec": self.resolved.to_json(),
            "warnings": self.warnings,
            "extra_pools": [pool.as_dict() for pool in self.extra_pools],
            "cpu_actors": [actor.as_dict() for actor in self.cpu_actors],
        }


def parse_spec(source: bytes | str | dict[str, Any], *, username: str, pending: Sequence[Path] = ()) -> ParsedSpec:
    """Parse and validate a spec sent by ``username``; raise SpecError listing every problem.

    ``source`` is the request body (bytes or text) or, for a JSON body, the spec object itself.
    Paths in a ``pending`` folder need not exist yet (an earlier pipeline step writes them).
    """
    raw, data = load_document(source)
    check = Checker(data, username, pending)
    kind = _text(check.value(SPEC_KEY["kind"], {}))
    workload = _text(check.value(SPEC_KEY["workload"], {"kind": kind}))
    resolved: dict[str, object] = {"kind": kind, "workload": workload}
    check_known(check, kind, workload)
    # An invalid workload (reported): the rest is checked as the workload its keys suggest, so
    # every other problem is reported in the same answer.
    judged = workload or _likely_workload(data)
    for key in SPEC_KEYS:
        if key.name not in resolved and key.checked_in(kind, judged):
            resolved[key.name] = check.value(key, resolved)
    if check.errors:
        raise SpecError(check.errors)
    return ParsedSpec(raw=raw, resolved=ResolvedSpec.from_json(resolved), warnings=check.warnings)


def _text(value: object) -> str | None:
    """A choice's resolved value (None: invalid, and reported)."""
    return value if isinstance(value, str) else None


def _likely_workload(data: object) -> str:
    """export when the spec holds only export's own keys, else a training one."""
    if not isinstance(data, dict):
        return Workload.PPO
    own = {name for key in SPEC_KEYS if (name := key.name) in data and key.workloads}
    export = {key.name for key in SPEC_KEYS if key.workloads == (Workload.EXPORT,)}
    return Workload.EXPORT if own and own <= export else Workload.PPO
