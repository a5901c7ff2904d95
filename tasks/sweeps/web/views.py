"""The sweep pages: the list, and a sweep (its trials' table, every trial's curve of the metric
on one chart, cancel).

A sweep's page polls its live part through htmx while it runs (static/js/live.js), as a
pipeline's does; static/js/sweep.js draws the chart from the curves the live part carries and
sorts the table in the browser. The rows are tasks.sweeps.summary's, as the API's. Submitting a
sweep is the new-task form's (tasks.web.views.task_new_view): it takes a sweep document too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.users import request_user
from common.pages import page_or_part, state_filter, web_actor
from tasks.choices import TERMINAL_STATES, SweepState
from tasks.models import Task
from tasks.sweeps.actions import cancel_sweep
from tasks.sweeps.models import Sweep
from tasks.sweeps.summary import TrialRow, summarize

SWEEPS_PER_PAGE = 25


def _visible(request: HttpRequest) -> QuerySet[Sweep]:
    return Sweep.objects.visible_to(request_user(request)).select_related("user")


def _own_sweep(request: HttpRequest, sweep_id: str) -> Sweep:
    """The sweep, when the user may see it; another user's is a 404, as in the API."""
    return get_object_or_404(_visible(request), sweep_id=sweep_id)


@never_cache
@login_required
def sweep_list_view(request: HttpRequest) -> HttpResponse:
    chips = state_filter(request, _visible(request), SweepState.values)
    counted = chips.shown.order_by("-created_at", "-id").annotate(
        trial_count=Count("trials"),
        ended_count=Count("trials", filter=Q(trials__state__in=TERMINAL_STATES)),
        stopped_count=Count("trials", filter=Q(trials__early_stopped=True)),
    )
    page = Paginator(counted, SWEEPS_PER_PAGE).get_page(request.GET.get("page"))
    context = {"page": page, **chips.context(), "show_user": request.user.is_staff}
    return page_or_part(request, "tasks/sweep_list.html", "tasks/_sweep_list_live.html", context)


def param_labels(keys: Sequence[str]) -> dict[str, str]:
    """Each parameter's short name for the legend and the table's head: the last part of its
    dotted key (``lr`` for actor_rollout_ref.actor.optim.lr), the whole key where two would read
    the same (actor.kl_loss_coef and critic.kl_loss_coef)."""
    last = {key: key.rsplit(".", 1)[-1] for key in keys}
    names = list(last.values())
    return {key: short if names.count(short) == 1 else key for key, short in last.items()}


@dataclass(frozen=True)
class TrialLine:
    """A trial as the page shows it: its row and its parameters in the sweep's key order."""

    row: TrialRow
    # Its parameters as Python writes them (1e-06, as the legend and the CLI do: a template would
    # write 0.000001), in the sweep's key order.
    values: list[str]
    label: str  # "lr=1e-06, train_batch_size=256": its series' name in the chart's legend

    @property
    def task(self) -> Task:
        return self.row.task


def _lines(rows: list[TrialRow], keys: list[str]) -> list[TrialLine]:
    labels = param_labels(keys)
    lines = []
    for row in rows:
        values = [str(row.params.get(key, "")) for key in keys]
        label = ", ".join(f"{labels[key]}={value}" for key, value in zip(keys, values, strict=True))
        lines.append(TrialLine(row=row, values=values, label=label or f"trial {row.task.trial_index}"))
    return lines


@never_cache
@login_required
def sweep_detail_view(request: HttpRequest, sweep_id: str) -> HttpResponse:
    sweep = _own_sweep(request, sweep_id)
    summary = summarize(sweep)
    keys = summary.keys
    lines = _lines(summary.trials, keys)
    best = summary.best_trial.task_id if summary.best_trial else None
    context: dict[str, object] = {
        "sweep": sweep,
        "trials": lines,
        "columns": list(param_labels(keys).items()),
        "best": best,
        "ended": sum(1 for line in lines if line.task.state in TERMINAL_STATES),
        "early_stopped": sum(1 for line in lines if line.task.early_stopped),
        "can_cancel": not sweep.is_finished and any(line.task.can_cancel for line in lines),
        # What static/js/sweep.js draws: the trials with points, each a series of the one chart.
        "curves": {
            "metric": sweep.metric,
            "mode": sweep.mode,
            "trials": [
                {
                    "task_id": line.row.task_id,
                    # Its colour's: a trial keeps its colour when an earlier one draws its first line.
                    "index": line.task.trial_index,
                    "label": line.label,
                    "best": line.row.task_id == best,
                    "points": line.row.points,
                }
                for line in lines
                if line.row.points
            ],
        },
    }
    return page_or_part(request, "tasks/sweep_detail.html", "tasks/_sweep_live.html", context)


@login_required
@require_POST
def sweep_cancel_view(request: HttpRequest, sweep_id: str) -> HttpResponse:
    sweep = _own_sweep(request, sweep_id)
    if sweep.is_finished:
        messages.info(request, f"Sweep {sweep_id} had already ended ({sweep.state.lower()}): nothing to cancel.")
        return redirect("web:sweep-detail", sweep_id=sweep_id)
    cancel_sweep(sweep, actor=web_actor(request))
    sweep.refresh_from_db()
    if sweep.state == SweepState.SUCCEEDED:
        # A sweep with a trial that succeeded ends SUCCEEDED, canceled or not.
        messages.success(
            request, f"Sweep {sweep_id}: every trial not ended is canceled; it succeeded (a trial had succeeded)."
        )
    elif sweep.is_finished:
        messages.success(request, f"Sweep {sweep_id} is canceled.")
    else:
        messages.success(
            request,
            f"Sweep {sweep_id}: every trial not ended is canceled; those on Ray become Canceled once Ray "
            "reports their jobs stopped.",
        )
    return redirect("web:sweep-detail", sweep_id=sweep_id)
