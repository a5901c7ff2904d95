from django.db import migrations


def create(apps, schema_editor):
    Lease = apps.get_model("tasks", "Lease")
    Lease.objects.get_or_create(name="tick")
    # The safety net: django-q2 checks schedules every ~30 s and runs them at most once a
    # minute, so this only restarts the ticker if nothing else did (tasks.scheduler.run).
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="argus-tick-safety-net",
        defaults={"func": "tasks.scheduler.run", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="argus-tick-safety-net").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0002_scheduler"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create, remove)]
