"""The sweep API's serializers: the document as the schema declares it, and a sweep with its
trials as tasks.sweeps.summary reads them."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tasks.api.serializers import SpecDocument, json_body
from tasks.choices import SweepState, TaskState
from tasks.pipelines.document import PIPELINE_NAME_PATTERN
from tasks.sweeps.document import DISTRIBUTIONS, MAX_ETA, MAX_MIN_STEPS, MAX_SEED, MAX_TRIALS_SETTING
from tasks.sweeps.models import Mode
from tasks.sweeps.summary import SweepSummary, TrialRow

ANY_VALUE = serializers.JSONField(help_text="A number, a string, a boolean (a spec key's: the key's own type).")


class SweepRandomDocument(serializers.Serializer[None]):
    samples = serializers.IntegerField(
        min_value=1, help_text=f"How many trials to draw (at most {MAX_TRIALS_SETTING}, 256 by default)."
    )
    seed = serializers.IntegerField(
        min_value=0, max_value=MAX_SEED, required=False, allow_null=True, help_text="The draws' seed; default 0."
    )
    space = serializers.DictField(
        child=serializers.DictField(child=serializers.JSONField()),
        help_text="Each key's distribution, one of " + ", ".join(f"{{{name}: …}}" for name in DISTRIBUTIONS) + ": "
        "[lo, hi] for the first three, a list of values for choice.",
    )


class SweepEarlyStopDocument(serializers.Serializer[None]):
    metric = serializers.CharField(
        help_text="The metric trials are compared on, as verl logs it (val-core/openai/gsm8k/acc/mean@1)."
    )
    mode = serializers.ChoiceField(choices=Mode.choices, required=False, help_text="Which way is better; default max.")
    min_steps = serializers.IntegerField(
        min_value=1,
        max_value=MAX_MIN_STEPS,
        required=False,
        allow_null=True,
        help_text="The first rung's step; rungs at min_steps × eta^k. Without it: no early stopping (the metric "
        "still names the best trial).",
    )
    eta = serializers.IntegerField(
        min_value=2,
        max_value=MAX_ETA,
        required=False,
        allow_null=True,
        help_text="A trial at a rung goes on when in the top 1/eta of the values recorded there; default 2.",
    )


class SweepDocumentSerializer(serializers.Serializer[None]):
    """For the schema: a sweep document (YAML, or JSON). Every combination of grid's values (or
    each of random's samples) is a trial: the base spec with those keys set, a spec key by its
    value, any other as a Hydra override of the trial's verl command."""

    name = serializers.RegexField(
        rf"^{PIPELINE_NAME_PATTERN}$", required=False, allow_null=True, help_text="Optional; shown beside its id."
    )
    base = SpecDocument(help_text="The task spec every trial starts from (basic or advanced; no after/after_any).")
    grid = serializers.DictField(
        child=serializers.ListField(child=ANY_VALUE, min_length=1),
        required=False,
        allow_null=True,
        help_text="Key -> its values; every combination is a trial, the first key's values outermost.",
    )
    random = SweepRandomDocument(required=False, allow_null=True, help_text="Instead of grid: sampled trials.")
    max_concurrent = serializers.IntegerField(
        min_value=1, required=False, allow_null=True, help_text="At most this many trials admitted at once; no cap."
    )
    early_stop = SweepEarlyStopDocument(
        required=False, allow_null=True, help_text="Successive halving on a validation metric verl logs."
    )


SWEEP_JSON = json_body("SweepJSON", SweepDocumentSerializer)


class SweepTrialSerializer(serializers.Serializer[TrialRow]):
    task_id = serializers.CharField(help_text="The trial's task.")
    trial_index = serializers.IntegerField(
        source="task.trial_index", help_text="Its place in the sweep's order (grid order, or the samples')."
    )
    params = serializers.DictField(
        child=serializers.JSONField(), help_text="The keys it sets, as the sweep names them, in its document's order."
    )
    state = serializers.ChoiceField(source="task.state", choices=TaskState.choices)
    early_stopped = serializers.BooleanField(
        source="task.early_stopped", help_text="Stopped by the sweep's early stopping (it ended CANCELED)."
    )
    last_step = serializers.IntegerField(allow_null=True, help_text="The last step it logged; null: none yet.")
    best_value = serializers.FloatField(allow_null=True, help_text="The best value of the sweep's metric; null: none.")
    last_value = serializers.FloatField(allow_null=True, help_text="The last value of the sweep's metric; null: none.")


class SweepSerializer(serializers.Serializer[SweepSummary]):
    sweep_id = serializers.CharField(source="sweep.sweep_id")
    name = serializers.CharField(source="sweep.name", help_text="Empty: none.")
    user = serializers.CharField(source="sweep.user.username")
    state = serializers.ChoiceField(
        source="sweep.state",
        choices=SweepState.choices,
        help_text="RUNNING while any trial is unfinished; then SUCCEEDED when one did, CANCELED when a person "
        "canceled it, else FAILED.",
    )
    max_concurrent = serializers.IntegerField(
        source="sweep.max_concurrent", allow_null=True, help_text="At most this many trials admitted; null: no cap."
    )
    metric = serializers.CharField(source="sweep.metric", help_text="The metric trials are compared on; empty: none.")
    mode = serializers.ChoiceField(source="sweep.mode", choices=Mode.choices)
    early_stop = serializers.DictField(
        source="sweep.early_stop",
        child=serializers.IntegerField(),
        help_text="{min_steps, eta} of its successive halving; empty: none.",
    )
    created_at = serializers.DateTimeField(source="sweep.created_at")
    finished_at = serializers.DateTimeField(source="sweep.finished_at", allow_null=True)
    trials = SweepTrialSerializer(many=True, help_text="In the sweep's order (trial_index).")
    best_trial = serializers.SerializerMethodField(
        help_text="The task id of the trial with the best best_value (ties: the first); null when none has one."
    )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_best_trial(self, summary: SweepSummary) -> str | None:
        return summary.best_trial.task_id if summary.best_trial is not None else None
