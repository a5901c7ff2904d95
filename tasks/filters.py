from __future__ import annotations

import django_filters

from tasks.models import Task, TaskState, Workload


class TaskFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=TaskState.choices)
    workload = django_filters.ChoiceFilter(choices=Workload.choices)
    user = django_filters.CharFilter(field_name="user__username")

    class Meta:
        model = Task
        fields = ["state", "workload", "user"]
