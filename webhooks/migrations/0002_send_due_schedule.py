from django.db import migrations


def create(apps, schema_editor):
    # Retries: django-q2 has no delayed enqueue, so this pass sends every delivery whose
    # next_try_at has come (webhooks.delivery). Schedules run at most once a minute.
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="webhooks-send-due",
        defaults={"func": "webhooks.delivery.send_due", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="webhooks-send-due").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create, remove)]
