from __future__ import annotations

import django_filters

from tasks.choices import TaskState, Workload
from tasks.models import Task


class TaskFilter(django_filters.FilterSet):
    # No DISTINCT: the filter joins nothing, so rows cannot repeat, and DISTINCT over every
    # column makes the paginator's COUNT(*) scan the whole table (bench/api_intake.py).
    state = django_filters.MultipleChoiceFilter(choices=TaskState.choices, distinct=False)
    workload = django_filters.ChoiceFilter(choices=Workload.choices)
    user = django_filters.CharFilter(field_name="user__username")

    class Meta:
        model = Task
        fields = ["state", "workload", "user"]
