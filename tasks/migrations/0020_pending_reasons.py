# A task's pending reason moves to a narrow table of its own (tasks.queue.reasons): the
# scheduler's first tick over a new queue writes 10,000 of them at once.

import django.db.models.deletion
from django.db import migrations, models


def copy_reasons(apps, schema_editor):
    Task = apps.get_model("tasks", "Task")
    PendingReason = apps.get_model("tasks", "PendingReason")
    given = Task.objects.exclude(pending_reason="").values_list("pk", "pending_reason").iterator(chunk_size=2000)
    batch = []
    for pk, text in given:
        batch.append(PendingReason(task_id=pk, text=text))
        if len(batch) == 2000:
            PendingReason.objects.bulk_create(batch)
            batch = []
    PendingReason.objects.bulk_create(batch)


def copy_back(apps, schema_editor):
    Task = apps.get_model("tasks", "Task")
    PendingReason = apps.get_model("tasks", "PendingReason")
    for pk, text in PendingReason.objects.exclude(text="").values_list("pk", "text").iterator(chunk_size=2000):
        Task.objects.filter(pk=pk).update(pending_reason=text)


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0019_cpu_actors"),
    ]

    operations = [
        migrations.CreateModel(
            name="PendingReason",
            fields=[
                (
                    "task",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="pending",
                        serialize=False,
                        to="tasks.task",
                    ),
                ),
                ("text", models.CharField(blank=True, max_length=500)),
            ],
        ),
        migrations.RunPython(copy_reasons, copy_back),
        migrations.RemoveField(model_name="task", name="pending_reason"),
    ]
