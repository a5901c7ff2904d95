"""The one error a spec, pipeline or sweep document can raise: every problem found, by field."""

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


class Problems:
    """Every problem a document's parser found so far, by field: what its SpecError carries (the
    parser goes on after one, so that a person fixes the document in one round trip)."""

    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}

    def add(self, field: str, message: str) -> None:
        messages = self.fields.setdefault(field, [])
        if message not in messages:
            messages.append(message)

    def raise_any(self) -> None:
        """End the parse with them, if there are any: each stage reads what the one before found."""
        if self.fields:
            raise SpecError(self.fields)
