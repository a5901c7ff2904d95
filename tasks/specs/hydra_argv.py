"""An advanced command's arguments, read the way the verl trainer's Hydra will read them.

verl's trainers are `@hydra.main` programs: their argv goes through Hydra's own argparse parser
(`--multirun`, `--config-path`, … and the overrides) and each override through Hydra's override
grammar, where `trainer={nnodes:4}` is a dict, `[a,'b']` a list, `1,2` or `range(…)` a sweep.
Checks written against `key=value` text alone miss every one of those forms, so this module asks
Hydra itself (hydra-core, pinned to the version verl runs with) and hands back plain leaves:
`trainer={nnodes:4,n_gpus_per_node:8}` becomes `trainer.nnodes = 4` and
`trainer.n_gpus_per_node = 8`, checked exactly like the dotted keys.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NoReturn

from hydra._internal.utils import get_args_parser
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import HydraException

# Hydra's ANTLR parser is slow on long lists (20,000 items: minutes, growing with the square) and
# recursive in nesting (a few hundred brackets overflow the stack). Real verl commands hold a
# few dozen overrides and a few list items; these bounds keep a 64 KiB command cheap to read.
MAX_ARGUMENTS = 512
MAX_ITEMS = 1024  # commas (list, dict and sweep separators) in all arguments together
MAX_NESTING = 16  # brackets, braces and parentheses inside one another


@dataclass(frozen=True)
class Leaf:
    """One value an override sets: ``key`` dotted from the config root, ``value`` a scalar
    (a list's items are leaves of the list's own key); ``override`` is the argument as written."""

    key: str
    value: object
    override: str


@dataclass
class HydraArgv:
    """What Hydra will make of an argv: its switches, the config values set, the groups chosen."""

    multirun: bool = False
    config_path: str | None = None
    config_dir: str | None = None
    experimental_rerun: str | None = None
    leaves: list[Leaf] = field(default_factory=list)
    # (group, chosen option) for `group=option` with a `/` in the group.
    groups: list[tuple[str, str]] = field(default_factory=list)
    # Keys set through `key@package=…`: where the value lands is not the key.
    packages: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    sweeps: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def values(self, key: str) -> list[object]:
        return [leaf.value for leaf in self.leaves if leaf.key == key]


class _ArgvError(Exception):
    pass


def _refuse(message: str) -> NoReturn:
    raise _ArgvError(message)


def _leaves(key: str, value: object, override: str) -> Iterator[Leaf]:
    """Scalars of ``value`` set at ``key``: mapping keys extend the key, list items share it."""
    if isinstance(value, dict):
        for sub, item in value.items():
            yield from _leaves(f"{key}.{sub}" if key else str(sub), item, override)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(key, item, override)
    else:
        yield Leaf(key, value, override)


def _nesting(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in "[{(":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]})":
            depth -= 1
    return deepest


def _too_costly(args: list[str]) -> str | None:
    if len(args) > MAX_ARGUMENTS:
        return f"has {len(args)} arguments; at most {MAX_ARGUMENTS} are allowed"
    items = sum(arg.count(",") for arg in args)
    if items > MAX_ITEMS:
        return f"has {items} list or sweep items in all; at most {MAX_ITEMS} are allowed"
    deepest = max((_nesting(arg) for arg in args), default=0)
    if deepest > MAX_NESTING:
        return f"nests brackets {deepest} deep; at most {MAX_NESTING} levels are allowed"
    return None


def parse(args: list[str]) -> HydraArgv:
    """Read ``args`` (the words after the module name) with Hydra's own parsers."""
    result = HydraArgv()
    too_costly = _too_costly(args)
    if too_costly:
        result.errors.append(too_costly)
        return result
    parser = get_args_parser()
    # argparse reports errors (and --version) by exiting the process; here they are messages.
    parser.error = _refuse  # type: ignore[method-assign]
    parser.exit = lambda status=0, message=None: _refuse(message or "exits at once")  # type: ignore[method-assign]
    try:
        namespace: argparse.Namespace = parser.parse_args(args)
    except _ArgvError as exc:
        result.errors.append(f"Hydra cannot read the arguments: {str(exc).strip()}")
        return result
    result.multirun = bool(namespace.multirun)
    result.config_path = namespace.config_path
    result.config_dir = namespace.config_dir
    result.experimental_rerun = namespace.experimental_rerun
    overrides_parser = OverridesParser.create()
    for text in namespace.overrides:
        try:
            override = overrides_parser.parse_override(text)
        except HydraException as exc:
            result.errors.append(f"Hydra cannot read {text!r}: {str(exc).splitlines()[0]}")
            continue
        except RecursionError:  # not reached within MAX_NESTING; kept so no input is a 500
            result.errors.append(f"Hydra cannot read {text[:40]!r}…: nested too deeply")
            continue
        _add(result, override, text)
    return result


def _add(result: HydraArgv, override: Override, text: str) -> None:
    key = override.key_or_group
    if override.is_sweep_override():
        result.sweeps.append(text)
    elif override.package is not None:
        result.packages.append(text)
    elif override.type == OverrideType.DEL:
        result.deleted.append(key)
    elif "/" in key:
        result.groups.append((key, str(override.value())))
    else:
        result.leaves.extend(_leaves(key, override.value(), text))
