from django.db import migrations


def remove(apps, schema_editor):
    # Webhooks left django-q2: the webhook worker (manage.py sendwebhooks) sends every delivery,
    # in its own process, so that no receiver can hold a worker the scheduling tick needs.
    apps.get_model("django_q", "Schedule").objects.filter(name="webhooks-send-due").delete()


def restore(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="webhooks-send-due",
        defaults={"func": "webhooks.delivery.send_due", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0002_send_due_schedule")]

    operations = [migrations.RunPython(remove, restore)]
