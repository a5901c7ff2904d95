"""Pipeline documents: parse one, validate it whole, and the step outputs its specs name.

A document is ``name`` (optional) and ``steps``: each step a task spec plus ``name`` and, by step
name, ``after`` / ``after_any``; a step with neither runs after the one before it. A step's
strings may hold ``${steps.NAME.OUTPUT}``, resolved when the step becomes QUEUED (tasks.pipelines);
until then its spec is checked with a stand-in path for each, in a folder that need not exist.

``parse_pipeline`` is the entry point. Like parse_spec it collects every problem into one
SpecError, its fields named ``steps.<step>.<key>`` (``steps[<i>].name`` for a step without a name).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from accounts.homes import home_dir
from tasks.choices import Workload
from tasks.specs.errors import SpecError
from tasks.specs.parse import ParsedSpec, parse_spec
from tasks.specs.yaml_load import dump_yaml, load_document

# The names' one declaration: the parser matches them whole, the API schema anchors them (^...$).
STEP_NAME_PATTERN = r"[a-z0-9-]{1,64}"
PIPELINE_NAME_PATTERN = r"[A-Za-z0-9._-]{1,64}"
STEP_NAME = re.compile(STEP_NAME_PATTERN)
PIPELINE_NAME = re.compile(PIPELINE_NAME_PATTERN)
MAX_STEPS = 32
DOCUMENT_KEYS = ("name", "steps")
# A step's own keys beside its task spec's.
STEP_KEYS = ("name", "after", "after_any")
# What a step hands on: its task id, its folder, its last checkpoint, an export's model.
OUTPUTS = ("task_id", "output_dir", "checkpoint", "hf_model")
MACRO = re.compile(r"\$\{steps\.([^.}]*)\.([^}]*)\}")


@dataclass(frozen=True)
class StepDocument:
    name: str
    position: int
    after: tuple[str, ...]
    after_any: tuple[str, ...]
    spec: dict[str, Any]  # the task spec, macros as written
    parsed: ParsedSpec  # checked; its raw and resolved spec hold the macros as written

    @property
    def depends_on(self) -> tuple[str, ...]:
        return self.after + self.after_any


@dataclass(frozen=True)
class PipelineDocument:
    name: str
    raw: str
    steps: list[StepDocument]  # in the document's order

    def in_order(self) -> list[StepDocument]:
        """The steps, each after those it depends on (the document's order where it may)."""
        return topological(self.steps)


class Step(Protocol):
    """A step as topological() reads it: a document's, or a stored one (tasks.models.PipelineStep)."""

    @property
    def name(self) -> str: ...

    @property
    def depends_on(self) -> tuple[str, ...]: ...


S = TypeVar("S", bound=Step)


def topological(steps: Sequence[S]) -> list[S]:
    done: set[str] = set()
    ordered: list[S] = []
    while len(ordered) < len(steps):
        for step in steps:
            if step.name not in done and set(step.depends_on) <= done:
                done.add(step.name)
                ordered.append(step)
                break
        else:  # parse_pipeline refuses cycles
            raise ValueError("the steps' dependencies hold a cycle")
    return ordered


def ancestors(graph: Mapping[str, Iterable[str]], name: str) -> set[str]:
    """Every step ``name`` runs after, directly or through others (``graph``: step -> its deps)."""
    seen: set[str] = set()
    stack = list(graph.get(name, ()))
    while stack:
        other = stack.pop()
        if other not in seen:
            seen.add(other)
            stack.extend(graph.get(other, ()))
    return seen


def descendants(graph: Mapping[str, Iterable[str]], names: Iterable[str]) -> set[str]:
    """``names`` and every step that runs after one of them, directly or not."""
    found = set(names)
    grew = True
    while grew:
        grew = False
        for step, deps in graph.items():
            if step not in found and found & set(deps):
                found.add(step)
                grew = True
    return found


def _cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the path that closes it (["a", "b", "a"]), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in graph.get(node, ()):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state:
                found = visit(dep, [*path, dep])
                if found:
                    return found
        state[node] = 2
        return None

    for node in graph:
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


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


def macros_in(value: Any) -> list[tuple[str, str, str]]:
    """Every ``${steps.NAME.OUTPUT}`` in the strings of ``value``: (text, NAME, OUTPUT)."""
    found: list[tuple[str, str, str]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.extend((match.group(0), match.group(1), match.group(2)) for match in MACRO.finditer(item))
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def substitute(value: Any, values: Mapping[str, str]) -> Any:
    """``value`` with each macro text in ``values`` (text -> value) written in, in every string."""
    if isinstance(value, str):
        return MACRO.sub(lambda match: values.get(match.group(0), match.group(0)), value)
    if isinstance(value, dict):
        return {key: substitute(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, values) for item in value]
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
    resolved = _restore(parsed.resolved, back)
    return replace(parsed, raw=dump_yaml(spec), resolved=resolved, warnings=_restore(parsed.warnings, back))


def parse_pipeline(source: bytes | str | dict[str, Any], *, username: str) -> PipelineDocument:
    """Parse and validate a whole pipeline document; raise SpecError naming every problem."""
    raw, data = load_document(source)
    errors: dict[str, list[str]] = {}

    def fail(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if not isinstance(data, dict):
        raise SpecError({"spec": [f"must be a mapping with steps, not {type(data).__name__}"]})
    for key in data:
        if key not in DOCUMENT_KEYS:
            fail(str(key), f"unknown key; a pipeline has {', '.join(DOCUMENT_KEYS)} (a step's keys go in its entry)")
    name = data.get("name")
    if name is not None and (not isinstance(name, str) or not PIPELINE_NAME.fullmatch(name)):
        fail("name", "must be up to 64 letters, digits, '.', '_' or '-'")
        name = None
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        fail("steps", "must be a list of one or more steps")
        raise SpecError(errors)
    if len(steps) > MAX_STEPS:
        fail("steps", f"has {len(steps)} steps; at most {MAX_STEPS}")
        raise SpecError(errors)

    # 1. Names, unique.
    names: list[str] = []
    for index, step in enumerate(steps):
        where = f"steps[{index}]"
        if not isinstance(step, dict):
            fail(where, f"must be a mapping (a task spec with a name), not {type(step).__name__}")
            names.append("")
            continue
        step_name = step.get("name")
        if not isinstance(step_name, str) or not STEP_NAME.fullmatch(step_name):
            fail(f"{where}.name", "is required: 1 to 64 of a-z, 0-9 and '-'")
            names.append("")
        elif step_name in names:
            fail(f"steps.{step_name}.name", f"is the name of step {names.index(step_name) + 1} too: names are unique")
            names.append("")
        else:
            names.append(step_name)
    if errors:
        raise SpecError(errors)

    # 2. Dependencies, by step name: known, not itself; no after and no after_any: the step before.
    graph: dict[str, list[str]] = {}
    deps: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for index, step in enumerate(steps):
        step_name = names[index]
        lists: list[tuple[str, ...]] = []
        for key in ("after", "after_any"):
            value = step.get(key)
            if value is None:
                lists.append(())
                continue
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                fail(f"steps.{step_name}.{key}", "must be a list of step names")
                lists.append(())
                continue
            for other in value:
                if other == step_name:
                    fail(f"steps.{step_name}.{key}", "names the step itself")
                elif other not in names:
                    fail(f"steps.{step_name}.{key}", f"names no step of this pipeline: {other[:64]!r}")
            if len(set(value)) != len(value):
                fail(f"steps.{step_name}.{key}", "names a step twice")
            lists.append(tuple(dict.fromkeys(other for other in value if other in names and other != step_name)))
        after, after_any = lists
        if "after" not in step and "after_any" not in step and index > 0:
            after = (names[index - 1],)
        both = set(after) & set(after_any)
        if both:
            fail(f"steps.{step_name}.after_any", f"names {sorted(both)[0]!r}, which after names too")
        deps[step_name] = (after, after_any)
        graph[step_name] = [*after, *after_any]
    cycle = _cycle(graph)
    if cycle:
        fail(f"steps.{cycle[0]}.after", f"the steps wait for each other in a cycle: {' -> '.join(cycle)}")
    if errors:
        raise SpecError(errors)

    # 3. Macros: a known output of a step this one runs after (directly or through others).
    workloads = {names[i]: step.get("workload") for i, step in enumerate(steps)}
    for index, step in enumerate(steps):
        step_name = names[index]
        earlier = ancestors(graph, step_name)
        for key, value in step.items():
            for text, other, output in macros_in(value):
                field = f"steps.{step_name}.{key}"
                if output not in OUTPUTS:
                    fail(field, f"{text}: a step's outputs are {', '.join(OUTPUTS)}")
                elif other not in names:
                    fail(field, f"{text} names no step of this pipeline")
                elif other not in earlier:
                    fail(
                        field,
                        f"{text} names step {other!r}, which this step does not run after: a step reads the "
                        "outputs of the steps it runs after (after / after_any, or the step before it)",
                    )
                elif output == "hf_model" and workloads[other] != Workload.EXPORT:
                    fail(field, f"{text}: only an export step writes a Hugging Face model")

    if errors:
        raise SpecError(errors)

    # 4. Each step's task spec, as a task spec.
    parsed: dict[str, ParsedSpec] = {}
    for index, step in enumerate(steps):
        step_name = names[index]
        spec = {key: value for key, value in step.items() if key not in STEP_KEYS}
        try:
            parsed[step_name] = parse_step_spec(spec, username, f"steps.{step_name}.")
        except SpecError as error:
            for field, messages in error.fields.items():
                for message in messages:
                    fail(field if field.startswith("steps.") else f"steps.{step_name}.{field}", message)
    if errors:
        raise SpecError(errors)
    return PipelineDocument(
        name=name or "",
        raw=raw,
        steps=[
            StepDocument(
                name=names[index],
                position=index,
                after=deps[names[index]][0],
                after_any=deps[names[index]][1],
                spec={key: value for key, value in step.items() if key not in STEP_KEYS},
                parsed=parsed[names[index]],
            )
            for index, step in enumerate(steps)
        ],
    )
