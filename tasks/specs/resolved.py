"""The resolved spec: a valid spec as a typed, frozen value, read by attribute (SPEC §3).

ResolvedSpec has one attribute per key of the one table, tasks.specs.keys.SPEC_KEYS, in its
order and of its declared type (tests/tasks/specs/test_spec_keys.py holds the two together: a key added to
the table without its attribute, or the reverse, fails there). A mistyped key is then an
attribute mypy does not know, not a KeyError a user meets.

Task.spec stores it as JSON (to_json, from_json): the keys a spec of its kind and workload
takes, lists as lists, exactly as before the value was typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tasks.specs.keys import SPEC_KEYS


@dataclass(frozen=True)
class ResolvedSpec:
    """Every key resolved: defaults filled in, paths made absolute, $HOME macros expanded. A key a
    spec of its kind and workload does not take (an advanced spec's model_id, a training spec's
    checkpoint) is None, or empty for a list."""

    kind: str
    workload: str
    nnodes: int
    n_gpus_per_node: int
    priority: str
    preemptible: bool
    max_retries: int
    time_limit: int  # seconds; 0: no limit
    after: tuple[str, ...]
    after_any: tuple[str, ...]
    stall_timeout: int  # seconds; 0: not watched
    secrets: tuple[str, ...]
    keep_checkpoints: int | None  # 0: keep all
    keep_best: dict[str, str] | None  # {metric, mode}
    model_id: str | None
    train_file: str | None
    val_file: str | None
    total_epochs: int | None
    total_training_steps: int | None  # None too for a training spec: as many as the epochs take
    save_freq: int | None
    test_freq: int | None
    checkpoint: str | None
    backend: str | None
    trackers: tuple[str, ...]
    project: str | None
    overrides: tuple[str, ...]  # Hydra overrides, $HOME macros expanded
    command: str | None

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> ResolvedSpec:
        """The spec as the parser resolved it, or as Task.spec stores it. A key its kind and
        workload take must be there if the table requires it (KeyError otherwise: a stored spec
        that no longer builds); an optional one missing (a row older than the key) takes its
        default. ``document`` is JSON: its values are whatever was stored."""
        kind, workload = document["kind"], document["workload"]
        values: dict[str, Any] = {}
        for key in SPEC_KEYS:
            taken = key.checked_in(kind, workload)
            if taken and key.required:
                value = document[key.name]
            else:
                value = document.get(key.name, key.default_value() if taken else None)
            values[key.name] = tuple(value or ()) if key.value_type is list else value
        return cls(**values)

    def to_json(self) -> dict[str, object]:
        """As Task.spec stores it: the keys a spec of its kind and workload takes, in the table's
        order, lists as lists."""
        document: dict[str, object] = {}
        for key in SPEC_KEYS:
            if key.checked_in(self.kind, self.workload):
                value = getattr(self, key.name)
                document[key.name] = list(value) if isinstance(value, tuple) else value
        return document

    def task_fields(self) -> dict[str, object]:
        """The Task fields its keys set, by the table (SpecKey.field, stored as SpecKey.store)."""
        return {key.field: key.store(getattr(self, key.name)) for key in SPEC_KEYS if key.field}
