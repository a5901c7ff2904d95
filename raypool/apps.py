from __future__ import annotations

from django.apps import AppConfig


class RaypoolConfig(AppConfig):
    """The Ray node pool. No models: ``manage.py raynode`` runs with no database."""

    name = "raypool"
    verbose_name = "Ray node pool"
