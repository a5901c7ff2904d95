from __future__ import annotations

import json

from tasks.choices import Role, TaskState
from tests.cli.conftest import no_traceback
from webhooks.models import Delivery, Webhook


def test_add_list_deliveries_and_remove(alice, bob, argus_as, make_task, settings):
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    argus = argus_as(alice)
    added = argus.run("webhook", "add", "http://127.0.0.1:9/hook", "--event", "failed", "--event", "RETRYING")
    assert added.returncode == 0, added.stderr
    hook = Webhook.objects.get(user=alice)
    assert added.stdout == f"{hook.secret}\n" and hook.events == ["FAILED", "RETRYING"]

    listed = argus.run("webhook", "ls")
    assert "http://127.0.0.1:9/hook" in listed.stdout and "FAILED,RETRYING" in listed.stdout
    assert hook.secret not in listed.stdout

    task = make_task(alice)
    for state in (TaskState.SUBMITTING, TaskState.SUBMITTED, TaskState.RUNNING, TaskState.FAILED):
        task.transition(state, role=Role.SCHEDULER, actor="scheduler")
    Delivery.objects.update(attempts=2, error="HTTP 500 Internal Server Error")
    sent = argus.run("webhook", "deliveries", str(hook.pk))
    assert task.task_id in sent.stdout and "PENDING" in sent.stdout and "HTTP 500 Internal Server Error" in sent.stdout
    rows = json.loads(argus.run("webhook", "deliveries", str(hook.pk), "--json").stdout)
    assert [(row["event_name"], row["attempts"]) for row in rows] == [("FAILED", 2)]

    bobs = argus_as(bob).run("webhook", "rm", str(hook.pk))
    assert bobs.returncode == 3 and "error:" in bobs.stderr
    removed = argus.run("webhook", "rm", str(hook.pk))
    assert removed.returncode == 0 and not Webhook.objects.exists()


def test_a_refused_url_names_the_field(alice, argus_as, settings):
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = []
    result = argus_as(alice).run("webhook", "add", "http://127.0.0.1:9/hook")
    assert result.returncode == 3
    no_traceback(result)
    assert "  url: 127.0.0.1 resolves to 127.0.0.1, a loopback address" in result.stderr
