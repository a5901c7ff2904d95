from __future__ import annotations

from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Tasks"

    def ready(self) -> None:
        from accounts.groups.rules import register_hold
        from tasks.group_holds import live_tasks

        register_hold(live_tasks)  # accounts cannot ask tasks itself: it is a floor below
