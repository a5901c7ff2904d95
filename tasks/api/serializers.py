from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, cast

from django.utils import timezone
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from accounts.secrets import NAME_MAX, NAME_PATTERN
from common.api import JSONBooleanField, JSONStringField, QueryBooleanField, QueryIntegerField
from common.durations import DURATION_MAX_CHARS
from tasks.attempts import Attempt, AttemptNode
from tasks.choices import QUEUE_STATES, Quota
from tasks.models import ClusterState, Event, Task
from tasks.pause import REASON_MAX, AdmissionControl
from tasks.specs.checks import ADVANCED, BASIC, COMMON, Duration, SpecKey
from tasks.specs.keys import SPEC_KEYS
from tasks.specs.pools import POOL_NAMES, Actor, Pool
from tasks.specs.rules import MAX_DEPENDENCIES, MAX_OVERRIDES, MAX_SECRETS

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema
    from drf_spectacular.utils import Direction

# A serializer's field of any value type: what DRF's stub says Serializer.get_fields gives.
AnyField = serializers.Field[Any, Any, Any, Any]

# What a serializer of plain data reads: a mapping of its fields' values (the cluster's summary,
# the queue's rows, the curves), not a model.
Record = Mapping[str, object]


class AttemptNodeSerializer(serializers.Serializer[AttemptNode]):
    node_id = serializers.CharField()
    ip = serializers.CharField(help_text="As the scheduler last saw it; empty when unknown.")
    gpus = serializers.IntegerField(help_text="GPUs of its placement groups on this node.")
    driver = serializers.BooleanField(help_text="Its driver ran here.")


class AttemptSerializer(serializers.ModelSerializer[Attempt]):
    summary = serializers.SerializerMethodField(
        help_text='"attempt 2 resumed from step 40", "attempt 1 started from scratch", …'
    )
    nodes = serializers.SerializerMethodField(
        help_text="Where Ray ran it, read back from Ray: each node of its placement groups with its GPUs, and "
        "its driver's node (driver: true). Empty until Ray has placed it."
    )
    group = serializers.CharField(
        source="group.name",
        read_only=True,
        allow_null=True,
        help_text="The group whose quota it was admitted in (its owner's then); null: no group.",
    )

    class Meta:
        model = Attempt
        fields = [
            "attempt_no",
            "ray_submission_id",
            "ray_status",
            "failure_kind",
            "message",
            "exit_code",
            "node_ip",
            "submitted_at",
            "start_time",
            "end_time",
            "resumed_from_step",
            "summary",
            "nodes",
            "quota",
            "group",
        ]
        extra_kwargs = {
            "quota": {
                "help_text": "Whose quota its GPUs count against: its group's own (in_quota), or other groups' "
                "idle quota it borrows (borrowed), as admission decided when it started."
            }
        }

    def get_summary(self, attempt: Attempt) -> str:
        return attempt.resume_summary

    @extend_schema_field(AttemptNodeSerializer(many=True))
    def get_nodes(self, attempt: Attempt) -> list[AttemptNode]:
        if not attempt.nodes and not attempt.node_id:
            return []
        context = cast(dict[str, Any], self.context)  # the root serializer's: one per response
        if "node_ips" not in context:
            context["node_ips"] = ClusterState.ips()  # one query per response, not per attempt
        return attempt.where(context["node_ips"])


class PoolSerializer(serializers.Serializer[Pool]):
    name = serializers.ChoiceField(
        choices=POOL_NAMES, help_text="trainer (nnodes x n_gpus_per_node), or another verl resource pool."
    )
    nnodes = serializers.IntegerField(help_text="Distinct nodes the pool needs.")
    n_gpus_per_node = serializers.IntegerField(help_text="GPUs it needs free on each of them.")


class ActorSerializer(serializers.Serializer[Actor]):
    name = serializers.CharField(help_text="verl's name for it (FullyAsyncTrainer, MessageQueue, …).")
    cpus = serializers.FloatField(help_text="CPUs it holds on one worker node, any node.")


def _holds_fields(field: AnyField) -> bool:
    return isinstance(field, serializers.BaseSerializer) or hasattr(field, "child")


RESULT_METRICS_HELP = (
    "An eval's result, once it SUCCEEDED: the validation metrics verl logged (val-core/…, val-aux/…), each one's "
    "last value; empty for any other task."
)


class TaskSerializer(serializers.ModelSerializer[Task]):
    user = serializers.CharField(source="user.username", read_only=True)
    pipeline_id = serializers.CharField(
        source="pipeline.pipeline_id",
        read_only=True,
        allow_null=True,
        help_text="The pipeline it is a step of; null: none.",
    )
    sweep_id = serializers.CharField(
        source="sweep.sweep_id",
        read_only=True,
        allow_null=True,
        help_text="The sweep it is a trial of; null: none.",
    )
    total_gpus = serializers.IntegerField(read_only=True, help_text="The GPUs of all its pools.")
    pools = PoolSerializer(
        many=True,
        read_only=True,
        help_text="verl's resource pools it holds, the trainer's first, each a per-node gang of its own; it starts "
        "when every pool fits at once (pools may share a node with room for both). Empty for an export.",
    )
    cpu_actors = ActorSerializer(
        many=True,
        read_only=True,
        help_text="verl's actors that hold CPUs of their own outside its pools' GPU bundles (verl's experimental "
        "trainers'), each on one worker node: it starts only where each fits beside its pools. Empty for others.",
    )
    cancel_requested = serializers.SerializerMethodField()
    result_metrics = serializers.DictField(
        child=serializers.FloatField(), read_only=True, help_text=RESULT_METRICS_HELP
    )
    quota = serializers.ChoiceField(
        choices=Quota.choices,
        read_only=True,
        allow_null=True,
        help_text="Its live or latest attempt's quota: in_quota (its group's own) or borrowed (other groups' idle "
        "quota); null: it never ran.",
    )
    tracker_url = serializers.SerializerMethodField(
        help_text="The experiment tracker's run (W&B, SwanLab) the task logs to, one across all its attempts, as "
        'the tracker printed it in the log ("View run at https://…"); null until then.'
    )
    estimated_start_at = serializers.SerializerMethodField(
        help_text="When the scheduler's plan starts this waiting task, to the minute; null when it is not "
        "waiting or not planned."
    )
    # DRF builds a model serializer's fields anew for each instance: for these ~35, a third of
    # the answer to a submission (bench/api_intake.py). They depend on the class alone (its
    # Meta and declared fields): built once per class, copied for each instance to bind. DRF's
    # deep copy runs each field's __init__ again (~0.18 ms for all); binding a plain field sets
    # only attributes of its own, so a shallow copy serves (~0.09 ms), and a field that holds
    # others (a nested serializer, a list's child) bound to it is copied whole.
    _built: ClassVar[dict[type, dict[str, AnyField]]] = {}

    def get_fields(self) -> dict[str, AnyField]:
        built = TaskSerializer._built.get(type(self))
        if built is None:
            built = TaskSerializer._built[type(self)] = super().get_fields()
        return {
            name: copy.deepcopy(field) if _holds_fields(field) else copy.copy(field) for name, field in built.items()
        }

    class Meta:
        model = Task
        fields = [
            "task_id",
            "user",
            "workload",
            "kind",
            "state",
            "nnodes",
            "n_gpus_per_node",
            "total_gpus",
            "pools",
            "cpu_actors",
            "priority",
            "preemptible",
            "max_retries",
            "created_at",
            "updated_at",
            "finished_at",
            "next_run_at",
            "estimated_start_at",
            "pending_reason",
            "error_summary",
            "result_metrics",
            "cancel_requested",
            "warnings",
            "pipeline_id",
            "step",
            "sweep_id",
            "trial_index",
            "params",
            "early_stopped",
            "queued_at",
            "tracker_url",
            "quota",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "preemptible": {"help_text": "May be stopped to make room for a task of higher priority."},
            "step": {"help_text": "Its step's name in its pipeline; empty: not a step."},
            "trial_index": {
                "help_text": "Its place in its sweep's order (grid order, or the samples'); null: no trial."
            },
            "params": {"help_text": "The keys its sweep set for this trial, as the sweep names them; empty: no trial."},
            "early_stopped": {"help_text": "Stopped by its sweep's early stopping (it ended CANCELED)."},
            "queued_at": {
                "help_text": "When it entered the queue: its wait counts from here (a WAITING task's once its "
                "dependencies are met); null while WAITING."
            },
            "pending_reason": {
                "help_text": "Why it waits, in words: for resources, its user's limits, or (WAITING) its dependencies "
                "or a place under its sweep's max_concurrent."
            },
        }

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_tracker_url(self, task: Task) -> str | None:
        return task.tracker_url or None

    def get_cancel_requested(self, task: Task) -> bool:
        return task.cancel_requested_at is not None

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_estimated_start_at(self, task: Task) -> str | None:
        # The scheduler leaves the last estimate in place once the task starts: it is no longer one.
        if task.state not in QUEUE_STATES or task.estimated_start_at is None:
            return None
        return serializers.DateTimeField().to_representation(task.estimated_start_at)


class TaskDetailSerializer(TaskSerializer):
    attempts = AttemptSerializer(many=True, read_only=True)
    time_left_s = serializers.SerializerMethodField(
        help_text="Seconds the running attempt has left under time_limit_s (counted from its start on Ray); "
        "null when there is no limit or nothing is running."
    )

    class Meta(TaskSerializer.Meta):
        fields = [*TaskSerializer.Meta.fields, "time_limit_s", "time_left_s", "attempts"]
        read_only_fields = fields
        extra_kwargs = {
            **TaskSerializer.Meta.extra_kwargs,
            "time_limit_s": {"help_text": "Seconds each attempt may run; null: no limit."},
        }

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_time_left_s(self, task: Task) -> int | None:
        # all(): the prefetched attempts of the detail view, with no query of its own.
        latest = max(task.attempts.all(), key=lambda attempt: attempt.attempt_no, default=None)
        return task.time_left_s(latest, timezone.now())


class TaskSpecSerializer(serializers.Serializer[Record]):
    raw = serializers.CharField(help_text="The spec exactly as it was sent.")
    resolved = serializers.DictField(
        help_text="The validated spec with macros expanded, plus the argv Ray runs and the job root."
    )


class EventSerializer(serializers.ModelSerializer[Event]):
    attempt_no = serializers.SerializerMethodField()

    class Meta:
        model = Event
        fields = ["created_at", "kind", "from_state", "to_state", "actor", "message", "attempt_no", "data"]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_attempt_no(self, event: Event) -> int | None:
        return event.attempt.attempt_no if event.attempt is not None else None


class SpecDurationField(serializers.Field[int, int | str, int | str, Record]):
    """For the schema: a duration key, seconds or words such as ``90m`` (common.durations)."""

    def __init__(self, *, low: int | None, high: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.low, self.high = low, high


class SpecDurationFieldExtension(OpenApiSerializerFieldExtension):
    target_class = SpecDurationField

    def map_serializer_field(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, object]:
        field = cast(SpecDurationField, self.target)
        seconds = {"type": "integer", "minimum": field.low, "maximum": field.high}
        # No pattern: the parser's is Python's (Unicode digits, any case), which JSON Schema cannot hold.
        words = {"type": "string", "maxLength": DURATION_MAX_CHARS}
        return {"oneOf": [seconds, words]}


# Where a key belongs, as its description in the schema starts.
_SPEC_KIND_NOTES = {COMMON: "", BASIC: "Basic specs. ", ADVANCED: "Advanced specs (kind: advanced). "}


# The fields a spec key can be in the schema (spec_field).
SpecField = (
    serializers.ListField
    | serializers.DictField
    | serializers.ChoiceField
    | serializers.BooleanField
    | SpecDurationField
    | serializers.IntegerField
    | serializers.CharField
)


class _Common(TypedDict):
    required: bool
    allow_null: bool
    help_text: str


def spec_field(key: SpecKey) -> SpecField:
    """The schema's field for one spec key, from its declaration in tasks.specs.keys.SPEC_KEYS. A key
    only one kind of spec takes is optional here: the other kind leaves it out."""
    required = key.required and key.kind == COMMON and not key.workloads
    help_text = _SPEC_KIND_NOTES[key.kind] + key.help
    if callable(key.default):
        help_text += " Default: this site's."  # the schema is the same on every site
    elif (shown := key.shown_default()) is not None:
        help_text += f" Default: {shown}."
    common: _Common = {"required": required, "allow_null": not required, "help_text": help_text}
    if key.value_type is list:
        child, most = _list_items(key)
        return serializers.ListField(child=child, max_length=most, **common)
    if key.value_type is dict:  # keep_best: {metric, mode}
        return serializers.DictField(child=serializers.CharField(), **common)
    if key.choices is not None:
        return serializers.ChoiceField(choices=key.choices.choices, **common)
    if key.value_type is bool:
        return serializers.BooleanField(**common)
    if key.value_type is Duration:
        return SpecDurationField(low=key.low, high=key.high, **common)
    if key.value_type is int:
        return serializers.IntegerField(min_value=key.low, max_value=key.high, **common)
    return serializers.CharField(**common)


def _list_items(key: SpecKey) -> tuple[serializers.ChoiceField | serializers.CharField, int]:
    """A list key's items and how many it takes: its choices, secret names, or task ids."""
    if key.choices is not None:
        return serializers.ChoiceField(choices=key.choices.choices), len(key.choices.values)
    if key.name == "secrets":
        return serializers.RegexField(rf"^{NAME_PATTERN}$", max_length=NAME_MAX), MAX_SECRETS
    if key.name == "overrides":
        return serializers.CharField(), MAX_OVERRIDES
    # after, after_any: task ids. No pattern: the parser's is Python's \w (Unicode), not JSON Schema's.
    return serializers.CharField(max_length=Task._meta.get_field("task_id").max_length), MAX_DEPENDENCIES


class SpecDocument(serializers.Serializer[None]):
    """For the schema: the spec a YAML body holds (SPEC §3). An optional key may be null (it then
    takes its default). Its rules beyond types (files that exist and may be read, a command's
    checks) are the spec parser's: such a spec is a 400."""

    def get_fields(self) -> dict[str, AnyField]:
        # Every key the parser takes, from the one table (tasks.specs.keys.SPEC_KEYS).
        return {key.name: spec_field(key) for key in SPEC_KEYS}


class SpecSubmission(serializers.Serializer[None]):
    """For the schema: JSON bodies either wrap the YAML text or are the spec itself."""

    spec = serializers.CharField(help_text="The task spec as YAML text.")


def json_body(name: str, document: type[serializers.Serializer[None]]) -> PolymorphicProxySerializer:
    """For the schema: a JSON body, `{"spec": "<yaml>"}` or the document itself, so that a
    generated client gets a model for the document sent as JSON too."""
    return PolymorphicProxySerializer(
        component_name=name, serializers=[SpecSubmission, document], resource_type_field_name=None
    )


class LogQuery(serializers.Serializer[None]):
    attempt = QueryIntegerField(min_value=1, required=False, help_text="Attempt number; default the latest.")
    tail = QueryIntegerField(min_value=0, max_value=1_000_000, required=False, help_text="Last N lines only.")
    follow = QueryBooleanField(required=False, default=False, help_text="Stream until the attempt ends.")


class MetricsQuery(serializers.Serializer[None]):
    attempt = QueryIntegerField(
        min_value=1, required=False, help_text="One attempt's curves; default: the whole task, across its attempts."
    )


class AttemptSpanSerializer(serializers.Serializer[Record]):
    attempt_no = serializers.IntegerField()
    first_step = serializers.IntegerField(
        allow_null=True,
        help_text="The first step it trained; null: none yet (its validation before training, at the step it "
        "started from, is none).",
    )
    last_step = serializers.IntegerField(allow_null=True, help_text="The last step it trained; null: none yet.")
    resumed_from_step = serializers.IntegerField(
        allow_null=True, help_text="The checkpoint step it resumed from; null: from scratch (or not said yet)."
    )


class MetricsSerializer(serializers.Serializer[Record]):
    attempt = serializers.IntegerField(allow_null=True, help_text="The attempt asked for; null: across all attempts.")
    attempts = AttemptSpanSerializer(many=True, help_text="Where each attempt ran on the step axis, in order.")
    last_step = serializers.IntegerField(
        allow_null=True, help_text="The last step of the latest attempt that logged one: where the training is now."
    )
    total_steps = serializers.IntegerField(allow_null=True)
    series = serializers.DictField(
        child=serializers.ListField(child=serializers.ListField(child=serializers.FloatField())),
        help_text='{"<metric>": [[step, value], ...]}',
    )


class QueueEntrySerializer(serializers.Serializer[Record]):
    position = serializers.IntegerField(allow_null=True, help_text="1 = next to start; null for tasks on Ray.")
    task_id = serializers.CharField(allow_null=True, help_text="null for another user's task.")
    user = serializers.CharField(allow_null=True)
    state = serializers.CharField()
    priority = serializers.CharField()
    preemptible = serializers.BooleanField(help_text="May be stopped to make room for a task of higher priority.")
    nnodes = serializers.IntegerField()
    n_gpus_per_node = serializers.IntegerField()
    gpus = serializers.IntegerField(help_text="The GPUs of all its pools.")
    pools = PoolSerializer(many=True, help_text="verl's resource pools, the trainer's first (as a task's).")
    reason = serializers.CharField()
    note = serializers.CharField(
        allow_blank=True,
        help_text="Its place in words, as the caller reads it: \"about 14:20 UTC, behind 2 tasks of bob's and 1 of "
        'yours; 1 task of a lighter user (carol) goes first (fair share)". Empty for tasks on Ray.',
    )
    estimated_start_at = serializers.DateTimeField(
        allow_null=True, help_text="When the scheduler's plan starts it, to the minute; null: not planned, or on Ray."
    )
    share = serializers.FloatField(
        help_text="Its owner's fair-share factor, in (0, 1]: 1 has used nothing; the lower, the heavier the user."
    )
    created_at = serializers.DateTimeField()
    next_run_at = serializers.DateTimeField(allow_null=True)


class ShareSerializer(serializers.Serializer[Record]):
    user = serializers.CharField()
    gpu_hours = serializers.FloatField(help_text="GPU-hours used, decayed with ARGUS_FAIR_SHARE_HALF_LIFE_S.")
    weight = serializers.FloatField(help_text="The share an admin gave the user (fair_share_weight; default 1).")
    share = serializers.FloatField(
        help_text="The fair-share factor, in (0, 1]: 1 has used nothing, 1/2 used exactly its share, near 0 heavy. "
        "Among waiting tasks of the same priority, a higher factor goes first. With groups, each group has a band "
        "of (0, 1], a lighter group's above a heavier one's, and the user's factor among its members places it "
        "in its group's band."
    )
    running_gpus = serializers.IntegerField(help_text="GPUs of the user's tasks on Ray.")
    waiting_tasks = serializers.IntegerField()
    group = serializers.CharField(
        allow_null=True,
        allow_blank=True,
        help_text='The user\'s group ("": none; those users are a group of their own). Fair share orders groups '
        "first, by usage over weight: every user of a lighter group has a higher share than every user of a "
        "heavier one. null: another group's member (an admin sees every user's group).",
    )
    group_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="The group's GPU-hours: its members', decayed. null as for group."
    )
    group_weight = serializers.FloatField(
        allow_null=True, help_text="The group's fair_share_weight (1 for users in no group). null as for group."
    )
    group_share = serializers.FloatField(
        allow_null=True,
        help_text="The group's fair-share factor among the groups, in (0, 1]: 1 has used nothing, 1/2 used exactly "
        "its share, near 0 heavy. null as for group.",
    )


class NodeSerializer(serializers.Serializer[Record]):
    node_id = serializers.CharField()
    ip = serializers.CharField()
    alive = serializers.BooleanField()
    is_head = serializers.BooleanField()
    is_worker = serializers.BooleanField()
    gpus_total = serializers.FloatField()
    gpus_free = serializers.FloatField()
    cpus_total = serializers.FloatField()
    cpus_free = serializers.FloatField()


class ForeignJobSerializer(serializers.Serializer[Record]):
    """A live Ray job that Argus did not submit: it holds resources Argus did not place."""

    submission_id = serializers.CharField(allow_blank=True)
    job_id = serializers.CharField(allow_blank=True)
    status = serializers.CharField()
    entrypoint = serializers.CharField(allow_blank=True)
    start_time = serializers.IntegerField(allow_null=True, help_text="Milliseconds since the epoch, as Ray reports it.")
    driver_node_id = serializers.CharField(allow_blank=True)


class HeadSerializer(serializers.Serializer[Record]):
    job_server_url = serializers.CharField(
        allow_null=True, help_text="Ray's dashboard and Jobs API; shown to admins only (null for others, or unknown)."
    )
    updated_at = serializers.DateTimeField(allow_null=True)
    fresh = serializers.BooleanField()
    known = serializers.BooleanField(help_text="Whether Argus knows the head's address: configured, or in head.json.")


class RayAuthSerializer(serializers.Serializer[Record]):
    """Ray's token authentication, for admins: without it, whoever reaches the dashboard reads
    every job's environment, secrets included."""

    mode = serializers.ChoiceField(
        choices=["token", "disabled", ""],
        help_text="token: Ray refuses every client without the cluster's token; disabled: it asks none; "
        "empty: not known yet (as of the scheduler's last sweep).",
    )
    token_file = serializers.CharField(help_text="The token Argus sends (ARGUS_RAY_TOKEN_FILE); the dashboard asks it.")
    has_token = serializers.BooleanField(help_text="Whether that file holds a token Argus can send.")
    problem = serializers.CharField(allow_blank=True, help_text="Why Argus cannot use the file; empty: none.")


class ClusterSerializer(serializers.Serializer[Record]):
    reachable = serializers.BooleanField(help_text="Whether the scheduler reached Ray at its last check.")
    checked_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    nodes = NodeSerializer(many=True)
    gpus_total = serializers.FloatField()
    gpus_free = serializers.FloatField()
    cpus_total = serializers.FloatField(help_text="On live worker nodes.")
    cpus_free = serializers.FloatField()
    cpus_per_gpu = serializers.FloatField(
        help_text="CPUs admission wants beside each GPU on a node, as verl's bundles ask (ARGUS_CPUS_PER_GPU; 0: none)."
    )
    head = HeadSerializer()
    auth = RayAuthSerializer(allow_null=True, help_text="Ray's token authentication; admins only (null for others).")
    foreign_jobs = ForeignJobSerializer(
        many=True, help_text="Live Ray jobs Argus did not submit (as of the scheduler's last sweep of Ray's jobs)."
    )


class AdmissionSerializer(serializers.ModelSerializer[AdmissionControl]):
    class Meta:
        model = AdmissionControl
        fields = ["paused", "reason", "changed_by", "changed_at"]
        read_only_fields = fields
        extra_kwargs = {
            "reason": {"help_text": "Why admission is paused; empty while it is not."},
            "changed_at": {"help_text": "null: nobody has changed it yet."},
        }


class AdmissionChangeSerializer(serializers.Serializer[None]):
    paused = JSONBooleanField(help_text="true: no waiting task starts until it is false again; tasks on Ray go on.")
    reason = JSONStringField(
        max_length=REASON_MAX,
        allow_blank=True,
        default="",
        help_text="Shown on every page and on the waiting tasks; a pause without one says who paused. "
        "Ignored when resuming.",
    )


SPEC_JSON = json_body("SpecJSON", SpecDocument)
