"""A pipeline's steps as a graph of who runs after whom: the order they are created and drawn in,
what a step runs after (directly or through others), what runs again after it, and a cycle."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar


class Step(Protocol):
    """A step as the graph reads it: a document's, or a stored one (tasks.pipelines.models.PipelineStep)."""

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


def find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
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
