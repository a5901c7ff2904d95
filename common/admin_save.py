"""The admin site's edits, written so that they never put back what another process wrote."""

from __future__ import annotations

from typing import TypeVar

from django.contrib import admin
from django.db.models import Model
from django.forms import ModelForm
from django.http import HttpRequest

M = TypeVar("M", bound=Model)


class SaveChangedFieldsOnly(admin.ModelAdmin[M]):
    """An edit writes the fields the operator changed, and nothing else.

    ModelAdmin.save_model saves the whole row as it was read at the start of the request: a
    scheduler tick (or the webhook worker, or a token's use) that writes the same row meanwhile
    would be undone, a task put back in a state it has left. A new row is saved whole, as usual.
    """

    def save_model(self, request: HttpRequest, obj: M, form: ModelForm[M], change: bool) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        fields = changed_model_fields(obj, form)
        if fields:  # nothing changed: nothing to write
            obj.save(update_fields=fields)


def changed_model_fields(obj: M, form: ModelForm[M]) -> list[str]:
    """The fields of ``obj`` that ``form`` changed (a form field that is no model field is left out)."""
    concrete = {field.name for field in obj._meta.concrete_fields}
    return [name for name in form.changed_data if name in concrete]
