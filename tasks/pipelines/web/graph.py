"""A pipeline's steps laid out as a layered graph, for its page: each step a box in the column of
its depth (one more than the deepest step it runs after), joined to those steps by curves.

Pure geometry: the page draws it as inline SVG, boxes as HTML in <foreignObject>, every position
an SVG attribute (the site's CSP refuses style attributes and inline scripts). Simple on purpose:
pipelines have at most 32 steps (tasks.pipelines.document.MAX_STEPS), mostly chains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from tasks.pipelines.dag import topological

BOX_W = 248
BOX_H = 124
GAP_X = 72  # room for the curves between columns
GAP_Y = 28
PAD = 8
ARROW = 7  # the arrowhead's length: a curve stops short by this much


class GraphStep(Protocol):
    """A step as the layout reads it (tasks.pipelines.models.PipelineStep)."""

    @property
    def name(self) -> str: ...

    @property
    def depends_on(self) -> tuple[str, ...]: ...

    @property
    def after_any(self) -> list[str]: ...


S = TypeVar("S", bound=GraphStep)


@dataclass(frozen=True)
class Box(Generic[S]):
    step: S
    column: int
    row: int
    x: int
    y: int


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    any_end: bool  # after_any: it runs however the other ends (drawn dashed)
    path: str  # an SVG path, from the source's right side to the target's left


@dataclass(frozen=True)
class Drawing(Generic[S]):
    width: int
    height: int
    box_width: int
    box_height: int
    boxes: list[Box[S]]
    edges: list[Edge]


def layout(steps: Sequence[S]) -> Drawing[S]:
    """Columns by depth, left to right; in a column, steps in the order of the rows of the steps
    they run after (fewer crossings), then in the document's order; each column centred."""
    position = {step.name: index for index, step in enumerate(steps)}
    column: dict[str, int] = {}
    for step in topological(steps):
        column[step.name] = 1 + max((column[dep] for dep in step.depends_on), default=-1)
    columns: list[list[S]] = [[] for _ in range(max(column.values(), default=-1) + 1)]
    row: dict[str, float] = {}
    for index in range(len(columns)):
        members = [step for step in steps if column[step.name] == index]

        def order(step: S) -> tuple[float, int]:
            deps = [row[dep] for dep in step.depends_on]
            return (sum(deps) / len(deps) if deps else 0.0, position[step.name])

        members.sort(key=order)
        for number, step in enumerate(members):
            row[step.name] = number
        columns[index] = members
    tallest = max((len(members) for members in columns), default=0)
    boxes: dict[str, Box[S]] = {}
    for index, members in enumerate(columns):
        # Centred: a lone step between two branches sits between them.
        offset = (tallest - len(members)) * (BOX_H + GAP_Y) // 2
        for number, step in enumerate(members):
            x = PAD + index * (BOX_W + GAP_X)
            y = PAD + offset + number * (BOX_H + GAP_Y)
            boxes[step.name] = Box(step=step, column=index, row=number, x=x, y=y)
    edges = [
        Edge(source=dep, target=step.name, any_end=dep in step.after_any, path=_curve(boxes[dep], boxes[step.name]))
        for step in steps
        for dep in step.depends_on
    ]
    width = PAD * 2 + len(columns) * BOX_W + max(len(columns) - 1, 0) * GAP_X
    height = PAD * 2 + tallest * BOX_H + max(tallest - 1, 0) * GAP_Y
    ordered = [boxes[step.name] for step in steps]
    return Drawing(width=width, height=height, box_width=BOX_W, box_height=BOX_H, boxes=ordered, edges=edges)


def _curve(source: Box[S], target: Box[S]) -> str:
    x1, y1 = source.x + BOX_W, source.y + BOX_H // 2
    x2, y2 = target.x - ARROW, target.y + BOX_H // 2
    middle = (x1 + x2) // 2
    return f"M {x1} {y1} C {middle} {y1}, {middle} {y2}, {x2} {y2}"
