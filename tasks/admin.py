from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from common.admin_save import SaveChangedFieldsOnly
from tasks.attempts import Attempt
from tasks.models import Event, IllegalTransition, StaleState, Task
from tasks.pause import AdmissionControl

ATTEMPT_COLUMNS = ("attempt_no", "ray_submission_id", "ray_status", "failure_kind", "start_time", "end_time")
EVENT_COLUMNS = ("created_at", "kind", "from_state", "to_state", "actor", "message")


class AttemptInline(admin.TabularInline[Attempt, Task]):
    model = Attempt
    fk_name = "task"  # not preempted_for
    extra = 0
    can_delete = False
    fields = readonly_fields = ATTEMPT_COLUMNS
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class EventInline(admin.TabularInline[Event, Task]):
    model = Event
    extra = 0
    can_delete = False
    fields = readonly_fields = EVENT_COLUMNS
    ordering = ["created_at", "id"]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Task)
class TaskAdmin(SaveChangedFieldsOnly[Task]):
    """Tasks; an edit (priority, max_retries) writes only what changed: the scheduler writes the
    same rows every tick, and a whole-row save would put back an old state."""

    list_display = ["task_id", "user", "workload", "kind", "state", "total_gpus", "priority", "created_at"]
    list_filter = ["state", "workload", "kind", "priority"]
    search_fields = ["task_id", "user__username", "error_summary"]
    list_select_related = ["user"]
    date_hierarchy = "created_at"
    # The state only moves through the state machine (with its event); editing it here would lie.
    readonly_fields = [
        "task_id",
        "user",
        "workload",
        "kind",
        "state",
        "nnodes",
        "n_gpus_per_node",
        "spec_raw",
        "spec",
        "warnings",
        "error_summary",
        "pending_reason",
        "next_run_at",
        "cancel_requested_at",
        "created_at",
        "updated_at",
        "finished_at",
    ]
    fields = [*readonly_fields[:7], "priority", "max_retries", *readonly_fields[7:]]
    inlines = [AttemptInline, EventInline]
    actions = ["cancel_tasks", "requeue_tasks"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tasks come through the API and the web form, where specs are validated

    @admin.action(description="Cancel selected tasks")
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        self._apply(request, queryset, "cancel", "canceled or asked to stop")

    @admin.action(description="Requeue selected failed/canceled tasks")
    def requeue_tasks(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        self._apply(request, queryset, "requeue", "requeued")

    def _apply(self, request: HttpRequest, queryset: QuerySet[Task], method: str, verb: str) -> None:
        done, refused = 0, []
        for task in queryset:
            try:
                getattr(task, method)(actor=f"admin:{request.user.username}")
                done += 1
            except (IllegalTransition, StaleState):
                refused.append(f"{task.task_id} ({task.state})")
        if done:
            self.message_user(request, f"{done} task(s) {verb}.", messages.SUCCESS)
        if refused:
            self.message_user(request, "Not changed: " + ", ".join(refused), messages.WARNING)


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin[Attempt]):
    list_display = ["ray_submission_id", "task", "ray_status", "failure_kind", "start_time", "end_time"]
    list_filter = ["ray_status", "failure_kind"]
    search_fields = ["ray_submission_id", "task__task_id", "message"]
    list_select_related = ["task"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # what Ray reported; not for editing


@admin.register(Event)
class EventAdmin(admin.ModelAdmin[Event]):
    list_display = ["created_at", "task", "kind", "from_state", "to_state", "actor"]
    list_filter = ["kind", "to_state"]
    search_fields = ["task__task_id", "message", "actor"]
    list_select_related = ["task"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # the trail is append-only

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(AdmissionControl)
class AdmissionControlAdmin(admin.ModelAdmin[AdmissionControl]):
    list_display = ["__str__", "paused", "changed_by", "changed_at"]
    fields = ["paused", "reason", "changed_by", "changed_at"]
    readonly_fields = ["changed_by", "changed_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # One row: added here only while there is none (the API's first change adds it too).
        return super().has_add_permission(request) and not AdmissionControl.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # deleting the row would quietly resume admission, with nobody named

    def save_model(
        self, request: HttpRequest, obj: AdmissionControl, form: ModelForm[AdmissionControl], change: bool
    ) -> None:
        # Through set(), as the API does: who and when are filled in, a pause always has a
        # reason, the change is logged.
        saved = AdmissionControl.set(obj.paused, obj.reason, actor=f"admin:{request.user.username}")
        obj.pk = saved.pk
        obj.refresh_from_db()
