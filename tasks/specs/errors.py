"""The one error a spec or pipeline document can raise: every problem found, by field."""

from __future__ import annotations


class SpecError(Exception):
    """An invalid spec: ``fields`` maps each offending field ("spec" for the whole document)
    to its messages; ``code`` is "invalid", or "too_large" for a spec over the size limit."""

    def __init__(self, fields: dict[str, list[str]], code: str = "invalid") -> None:
        self.fields = fields
        self.code = code
        super().__init__("; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items()))


def whole(message: str, code: str = "invalid") -> SpecError:
    """An error of the whole document (field "spec")."""
    return SpecError({"spec": [message]}, code)
