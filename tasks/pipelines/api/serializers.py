"""The pipeline API's serializers: the document as the schema declares it, a pipeline and its steps."""

from __future__ import annotations

from rest_framework import serializers

from tasks.api.serializers import RESULT_METRICS_HELP, AnyField, SpecDocument, json_body
from tasks.choices import TaskState
from tasks.pipelines.document import PIPELINE_NAME_PATTERN, STEP_NAME_PATTERN
from tasks.pipelines.models import Pipeline, PipelineStep


class PipelineStepDocument(SpecDocument):
    """For the schema: one step of a pipeline document, a task spec with a name and, by step
    name, what it runs after."""

    def get_fields(self) -> dict[str, AnyField]:
        fields = super().get_fields()
        fields["name"] = serializers.RegexField(
            rf"^{STEP_NAME_PATTERN}$", help_text="The step's name: a-z, 0-9 and '-', unique in the pipeline."
        )
        names = "Step names it runs after"
        fields["after"] = serializers.ListField(
            child=serializers.CharField(),
            required=False,
            allow_null=True,
            help_text=f"{names}, once each SUCCEEDED. With neither after nor after_any: the step before it.",
        )
        fields["after_any"] = serializers.ListField(
            child=serializers.CharField(),
            required=False,
            allow_null=True,
            help_text=f"{names}, once each ended, however it ended.",
        )
        return fields


class PipelineDocumentSerializer(serializers.Serializer[None]):
    """For the schema: a pipeline document (YAML, or JSON). A step's strings may hold
    ${steps.NAME.task_id|output_dir|checkpoint|hf_model} of a step it runs after, resolved when
    the step becomes QUEUED."""

    name = serializers.RegexField(
        rf"^{PIPELINE_NAME_PATTERN}$", required=False, allow_null=True, help_text="Optional; shown beside its id."
    )
    steps = PipelineStepDocument(many=True, help_text="Its steps, each a task spec with a name.")


PIPELINE_JSON = json_body("PipelineJSON", PipelineDocumentSerializer)


class PipelineStepSerializer(serializers.ModelSerializer[PipelineStep]):
    task_id = serializers.CharField(source="task.task_id", read_only=True, help_text="The step's task now.")
    state = serializers.ChoiceField(source="task.state", choices=TaskState.choices, read_only=True)

    class Meta:
        model = PipelineStep
        fields = ["name", "task_id", "state"]
        read_only_fields = fields


class PipelineStepDetailSerializer(PipelineStepSerializer):
    workload = serializers.CharField(source="task.workload", read_only=True)
    reason = serializers.SerializerMethodField(
        help_text='Why it waits ("waits for alice-sft-…, RUNNING"), or how it ended ("its dependency … FAILED").'
    )
    created_at = serializers.DateTimeField(source="task.created_at", read_only=True)
    queued_at = serializers.DateTimeField(
        source="task.queued_at", read_only=True, allow_null=True, help_text="null while it waits for its dependencies."
    )
    finished_at = serializers.DateTimeField(source="task.finished_at", read_only=True, allow_null=True)
    result_metrics = serializers.DictField(
        source="task.result_metrics", child=serializers.FloatField(), read_only=True, help_text=RESULT_METRICS_HELP
    )

    class Meta(PipelineStepSerializer.Meta):
        fields = [*PipelineStepSerializer.Meta.fields, "workload", "after", "after_any", "reason"]
        fields += ["created_at", "queued_at", "finished_at", "result_metrics"]
        read_only_fields = fields
        extra_kwargs = {
            "after": {"help_text": "Step names it runs after, once each SUCCEEDED."},
            "after_any": {"help_text": "Step names it runs after, once each ended."},
        }

    def get_reason(self, step: PipelineStep) -> str:
        return step.task.pending_reason or step.task.error_summary


class PipelineSerializer(serializers.ModelSerializer[Pipeline]):
    user = serializers.CharField(source="user.username", read_only=True)
    steps = PipelineStepSerializer(many=True, read_only=True)

    class Meta:
        model = Pipeline
        fields = ["pipeline_id", "name", "state", "user", "created_at", "finished_at", "steps"]
        read_only_fields = fields
        extra_kwargs = {
            "state": {"help_text": "RUNNING while any step is unfinished; then SUCCEEDED, FAILED or CANCELED."}
        }


class PipelineDetailSerializer(PipelineSerializer):
    steps = PipelineStepDetailSerializer(many=True, read_only=True)
