"""argus show and argus pipeline show print an eval's result: each validation metric and its value."""

from __future__ import annotations

import json

from tasks.choices import TaskState
from tasks.models import Task
from tasks.pipelines.actions import submit_pipeline
from tests.conftest import EVAL_PIPELINE

RESULT = {"val-aux/openai/gsm8k/reward/mean@1": 0.5, "val-core/openai/gsm8k/acc/mean@1": 0.6666666666666666}


def test_show_prints_an_evals_result(alice, argus_as, datasets):
    pipeline = submit_pipeline(alice, EVAL_PIPELINE, actor="api:alice")
    steps = {step.name: step.task for step in pipeline.steps.select_related("task")}
    Task.objects.filter(pk=steps["eval"].pk).update(state=TaskState.SUCCEEDED, result_metrics=RESULT)
    argus = argus_as(alice)

    shown = argus.run("show", steps["eval"].task_id)
    assert shown.returncode == 0, shown.stderr
    lines = [line.rstrip() for line in shown.stdout.splitlines()]
    assert lines[lines.index(next(line for line in lines if line.startswith("RESULT"))) + 1 :][:2] == [
        "val-aux/openai/gsm8k/reward/mean@1  0.5",
        "val-core/openai/gsm8k/acc/mean@1    0.666667",
    ]
    assert json.loads(argus.run("show", steps["eval"].task_id, "--json").stdout)["result_metrics"] == RESULT
    assert "RESULT" not in argus.run("show", steps["sft"].task_id).stdout

    piped = argus.run("pipeline", "show", pipeline.pipeline_id)
    assert piped.returncode == 0, piped.stderr
    assert "RESULT OF EVAL" in piped.stdout and "val-core/openai/gsm8k/acc/mean@1    0.666667" in piped.stdout
    assert "RESULT OF SFT" not in piped.stdout
