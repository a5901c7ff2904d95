"""Pipeline documents: parse one and validate it whole.

A document is ``name`` (optional) and ``steps``: each step a task spec plus ``name`` and, by step
name, ``after`` / ``after_any``; a step with neither runs after the one before it. A step's
strings may hold ``${steps.NAME.OUTPUT}`` (tasks.pipelines.macros) and a sweep's best trial's
``${sweeps.SWEEP_ID.OUTPUT}`` (tasks.pipelines.sweep_outputs).

``parse_pipeline`` is the entry point. Like parse_spec it collects every problem into one
SpecError, its fields named ``steps.<step>.<key>`` (``steps[<i>].name`` for a step without a name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tasks.choices import Workload
from tasks.pipelines.dag import ancestors, find_cycle, topological
from tasks.pipelines.macros import OUTPUTS, macros_in, parse_step_spec
from tasks.pipelines.sweep_outputs import with_sweep_outputs
from tasks.specs.errors import Problems, SpecError
from tasks.specs.parse import ParsedSpec
from tasks.specs.yaml_load import load_document

# The names' one declaration: the parser matches them whole, the API schema anchors them (^...$).
STEP_NAME_PATTERN = r"[a-z0-9-]{1,64}"
PIPELINE_NAME_PATTERN = r"[A-Za-z0-9._-]{1,64}"
STEP_NAME = re.compile(STEP_NAME_PATTERN)
PIPELINE_NAME = re.compile(PIPELINE_NAME_PATTERN)
MAX_STEPS = 32
DOCUMENT_KEYS = ("name", "steps")
# A step's own keys beside its task spec's.
STEP_KEYS = ("name", "after", "after_any")


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


def is_pipeline_document(source: str | bytes) -> bool:
    """Whether ``source`` is a pipeline document (a mapping with ``steps``) rather than a task
    spec: what a form or a client that takes either sends it to. A document that does not load
    is not one: the task spec's checks then say what is wrong with it."""
    try:
        _, data = load_document(source)
    except SpecError:
        return False
    return isinstance(data, dict) and "steps" in data


# The dependencies of each step by name: (after, after_any).
Dependencies = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]


def parse_pipeline(source: bytes | str | dict[str, Any], *, username: str) -> PipelineDocument:
    """Parse and validate a whole pipeline document; raise SpecError naming every problem. In
    stages, each on what the one before found: the document's keys, the steps' names, their
    dependencies, their macros, then each step's task spec."""
    raw, data = load_document(source)
    problems = Problems()
    name, steps = _document(data, problems)
    names = _names(steps, problems)
    problems.raise_any()
    deps = _dependencies(steps, names, problems)
    problems.raise_any()
    graph = {step: [*after, *after_any] for step, (after, after_any) in deps.items()}
    _macros(steps, names, graph, problems)
    problems.raise_any()
    # A sweep's best trial is known now: written in before each step's spec is checked.
    specs = with_sweep_outputs([_task_spec(step) for step in steps], names, username, problems)
    problems.raise_any()
    parsed = _step_specs(specs, names, username, problems)
    problems.raise_any()
    return PipelineDocument(
        name=name or "",
        raw=raw,
        steps=[
            StepDocument(
                name=step_name,
                position=index,
                after=deps[step_name][0],
                after_any=deps[step_name][1],
                spec=specs[index],
                parsed=parsed[step_name],
            )
            for index, step_name in enumerate(names)
        ],
    )


def _document(data: Any, problems: Problems) -> tuple[str | None, list[Any]]:
    """The document's name (None when it has none, or a bad one) and its steps, as written."""
    if not isinstance(data, dict):
        raise SpecError({"spec": [f"must be a mapping with steps, not {type(data).__name__}"]})
    for key in data:
        if key not in DOCUMENT_KEYS:
            problems.add(
                str(key), f"unknown key; a pipeline has {', '.join(DOCUMENT_KEYS)} (a step's keys go in its entry)"
            )
    name = data.get("name")
    if name is not None and (not isinstance(name, str) or not PIPELINE_NAME.fullmatch(name)):
        problems.add("name", "must be up to 64 letters, digits, '.', '_' or '-'")
        name = None
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        problems.add("steps", "must be a list of one or more steps")
        raise SpecError(problems.fields)
    if len(steps) > MAX_STEPS:
        problems.add("steps", f"has {len(steps)} steps; at most {MAX_STEPS}")
        raise SpecError(problems.fields)
    return name, steps


def _names(steps: list[Any], problems: Problems) -> list[str]:
    """Each step's name, unique; "" where a step has none, a bad one, or another's."""
    names: list[str] = []
    for index, step in enumerate(steps):
        where = f"steps[{index}]"
        if not isinstance(step, dict):
            problems.add(where, f"must be a mapping (a task spec with a name), not {type(step).__name__}")
            names.append("")
            continue
        step_name = step.get("name")
        if not isinstance(step_name, str) or not STEP_NAME.fullmatch(step_name):
            problems.add(f"{where}.name", "is required: 1 to 64 of a-z, 0-9 and '-'")
            names.append("")
        elif step_name in names:
            problems.add(
                f"steps.{step_name}.name", f"is the name of step {names.index(step_name) + 1} too: names are unique"
            )
            names.append("")
        else:
            names.append(step_name)
    return names


def _dependencies(steps: list[dict[str, Any]], names: list[str], problems: Problems) -> Dependencies:
    """What each step runs after, by step name: known steps, not itself, in no cycle; a step with
    neither after nor after_any runs after the step before it."""
    deps: Dependencies = {}
    for index, step in enumerate(steps):
        step_name = names[index]
        after, after_any = (_named_steps(step, key, step_name, names, problems) for key in ("after", "after_any"))
        if "after" not in step and "after_any" not in step and index > 0:
            after = (names[index - 1],)
        both = set(after) & set(after_any)
        if both:
            problems.add(f"steps.{step_name}.after_any", f"names {sorted(both)[0]!r}, which after names too")
        deps[step_name] = (after, after_any)
    cycle = find_cycle({step: [*after, *after_any] for step, (after, after_any) in deps.items()})
    if cycle:
        problems.add(f"steps.{cycle[0]}.after", f"the steps wait for each other in a cycle: {' -> '.join(cycle)}")
    return deps


def _named_steps(
    step: dict[str, Any], key: str, step_name: str, names: list[str], problems: Problems
) -> tuple[str, ...]:
    """The steps a step's ``after`` or ``after_any`` names that exist and are not itself, once each."""
    value = step.get(key)
    if value is None:
        return ()
    field = f"steps.{step_name}.{key}"
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.add(field, "must be a list of step names")
        return ()
    for other in value:
        if other == step_name:
            problems.add(field, "names the step itself")
        elif other not in names:
            problems.add(field, f"names no step of this pipeline: {other[:64]!r}")
    if len(set(value)) != len(value):
        problems.add(field, "names a step twice")
    return tuple(dict.fromkeys(other for other in value if other in names and other != step_name))


def _macros(steps: list[dict[str, Any]], names: list[str], graph: dict[str, list[str]], problems: Problems) -> None:
    """Each macro names a known output of a step this one runs after (directly or through others)."""
    workloads = {names[i]: step.get("workload") for i, step in enumerate(steps)}
    for index, step in enumerate(steps):
        step_name = names[index]
        earlier = ancestors(graph, step_name)
        for key, value in step.items():
            for text, other, output in macros_in(value):
                field = f"steps.{step_name}.{key}"
                if output not in OUTPUTS:
                    problems.add(field, f"{text}: a step's outputs are {', '.join(OUTPUTS)}")
                elif other not in names:
                    problems.add(field, f"{text} names no step of this pipeline")
                elif other not in earlier:
                    problems.add(
                        field,
                        f"{text} names step {other!r}, which this step does not run after: a step reads the "
                        "outputs of the steps it runs after (after / after_any, or the step before it)",
                    )
                elif output == "hf_model" and workloads[other] != Workload.EXPORT:
                    problems.add(field, f"{text}: only an export step writes a Hugging Face model")


def _task_spec(step: dict[str, Any]) -> dict[str, Any]:
    """A step's task spec: the step less its own keys."""
    return {key: value for key, value in step.items() if key not in STEP_KEYS}


def _step_specs(
    specs: list[dict[str, Any]], names: list[str], username: str, problems: Problems
) -> dict[str, ParsedSpec]:
    """Each step's task spec checked as a task spec, its problems named by step."""
    parsed: dict[str, ParsedSpec] = {}
    for step_name, spec in zip(names, specs, strict=True):
        try:
            parsed[step_name] = parse_step_spec(spec, username, f"steps.{step_name}.")
        except SpecError as error:
            for field, messages in error.fields.items():
                for message in messages:
                    problems.add(field if field.startswith("steps.") else f"steps.{step_name}.{field}", message)
    return parsed
