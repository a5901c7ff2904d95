"""A step's outputs named in another step's spec: ``${steps.NAME.OUTPUT}``.

Until the step that reads them becomes QUEUED (tasks.pipelines.outputs resolves them then), a
step's spec is checked with a stand-in path for each, in a folder that need not exist; its raw
text and resolved spec keep the macros as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from accounts.homes import home_dir
from tasks.specs.errors import SpecError
from tasks.specs.parse import ParsedSpec, parse_spec
from tasks.specs.resolved import ResolvedSpec
from tasks.specs.yaml_load import dump_yaml

# What a step hands on: its task id, its folder, its last checkpoint, an export's model.
OUTPUTS = ("task_id", "output_dir", "checkpoint", "hf_model")
MACRO = re.compile(r"\$\{steps\.([^.}]*)\.([^}]*)\}")


def pending_folder(username: str, step: str) -> Path:
    """Where a step's outputs stand while the step is checked, before it has a task id."""
    return home_dir(username) / "jobs" / f"argus-step-{step}"


def stand_ins(username: str, step: str) -> dict[str, str]:
    """The value each of a step's outputs has while a spec naming it is checked, longest first."""
    folder = pending_folder(username, step)
    return {
        "checkpoint": str(folder / "checkpoints" / "global_step_LATEST"),
        "hf_model": str(folder / "hf_model"),
        "output_dir": str(folder),
        "task_id": folder.name,
    }


def macros_in(value: Any, pattern: re.Pattern[str] = MACRO) -> list[tuple[str, str, str]]:
    """Every ``${steps.NAME.OUTPUT}`` in the strings of ``value``: (text, NAME, OUTPUT); or every
    match of another ``pattern`` of that shape (a sweep's, tasks.pipelines.sweep_outputs)."""
    found: list[tuple[str, str, str]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.extend((match.group(0), match.group(1), match.group(2)) for match in pattern.finditer(item))
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def substitute(value: Any, values: Mapping[str, str], pattern: re.Pattern[str] = MACRO) -> Any:
    """``value`` with each macro text in ``values`` (text -> value) written in, in every string."""
    if isinstance(value, str):
        return pattern.sub(lambda match: values.get(match.group(0), match.group(0)), value)
    if isinstance(value, dict):
        return {key: substitute(item, values, pattern) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, values, pattern) for item in value]
    return value


def _restore(value: Any, stand_in: Mapping[str, str]) -> Any:
    """``value`` with each stand-in (stand-in -> macro text) put back as the macro it stands for."""
    if isinstance(value, str):
        for text, macro in stand_in.items():
            value = value.replace(text, macro)
        return value
    if isinstance(value, dict):
        return {key: _restore(item, stand_in) for key, item in value.items()}
    if isinstance(value, list):
        return [_restore(item, stand_in) for item in value]
    return value


def parse_step_spec(spec: dict[str, Any], username: str, field: str) -> ParsedSpec:
    """A step's task spec checked with stand-ins for the outputs its macros name (their folders
    need not exist yet); its raw text and resolved spec keep the macros as written. SpecError's
    fields start with ``field`` (``steps.NAME.``)."""
    macros = {text: (step, output) for text, step, output in macros_in(spec)}
    values = {text: stand_ins(username, step)[output] for text, (step, output) in macros.items()}
    pending = [pending_folder(username, step) for step, _ in macros.values()]
    try:
        parsed = parse_spec(substitute(spec, values), username=username, pending=pending)
    except SpecError as error:
        raise SpecError({f"{field}{name}": messages for name, messages in error.fields.items()}, error.code) from error
    # Longest first: a checkpoint's stand-in holds its step's folder's.
    back = dict(sorted(((value, text) for text, value in values.items()), key=lambda item: -len(item[0])))
    resolved = ResolvedSpec.from_json(_restore(parsed.resolved.to_json(), back))
    return replace(parsed, raw=dump_yaml(spec), resolved=resolved, warnings=_restore(parsed.warnings, back))


def stored_spec(spec_raw: str) -> dict[str, Any]:
    """A step's task spec as written, macros and all, from its task's spec_raw (our own YAML dump)."""
    loaded = yaml.safe_load(spec_raw)
    return loaded if isinstance(loaded, dict) else {}
