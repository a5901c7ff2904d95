"""The sweep pages in a real browser: the chart draws every trial's curve (and the new ones a poll
brings), the table sorts by the metric and the other columns, cancel after confirming, a trial's
page links its sweep, and a sweep submitted on the new-task page.

The ``page`` fixture fails a test whose page sent a request anywhere but the live server, or
logged a console error (every CSP violation is one).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Dialog, Page, expect

from tasks.choices import TaskState
from tasks.models import Task
from tasks.sweeps.models import Sweep, TrialCurve
from tests.tasks.sweeps.trials import BATCH, LR, make_sweep
from tests.web.helpers import shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
S = TaskState

GRID = [{LR: lr, BATCH: batch} for lr in (1e-6, 3e-6) for batch in (256, 512)]
# Trial 2 has logged no value yet; trial 3 is the best (0.6).
CURVES = [[(10, 0.2), (20, 0.5), (30, 0.4)], [(10, 0.1), (20, 0.15)], None, [(10, 0.3), (20, 0.6)]]
# static/js/sweep.js's first colours, one per series in the order drawn.
COLOURS = [(0x01, 0x72, 0xAD), (0xD0, 0x8C, 0x00), (0x2E, 0x85, 0x40), (0xB3, 0x26, 0x1E)]

# How many pixels of the chart's canvas are in each colour: a drawn line is many of them.
PIXELS_OF = """(canvas, colours) => {
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  const counts = colours.map(() => 0);
  for (let i = 0; i < data.length; i += 4) {
    colours.forEach(([r, g, b], n) => {
      const near = Math.abs(data[i] - r) < 24 && Math.abs(data[i + 1] - g) < 24 && Math.abs(data[i + 2] - b) < 24;
      if (near) counts[n] += 1;
    });
  }
  return counts;
}"""


@pytest.fixture
def sweep_and_trials(alice: User, make_task: Callable[..., Task]) -> tuple[Sweep, list[Task]]:
    return make_sweep(alice, make_task, GRID, curves=CURVES)


def legend(page: Page) -> list[str]:
    """The chart's series as its legend names them (uPlot's first row is the x axis)."""
    labels = page.locator("[data-sweep-chart] .u-legend .u-series .u-label").all_inner_texts()
    return labels[1:]


def column(page: Page, n: int) -> list[str]:
    """The text of the n-th cell of each of the table's rows, top to bottom."""
    return page.locator("table.sweep-trials tbody tr").evaluate_all(
        f"rows => rows.map(row => row.cells[{n}].dataset.value)"
    )


def test_the_chart_draws_every_trial_with_points_and_the_ones_a_poll_brings(
    signed_in_page: Page, sweep_and_trials: tuple[Sweep, list[Task]]
) -> None:
    page = signed_in_page
    sweep, trials = sweep_and_trials
    page.goto(f"/sweeps/{sweep.sweep_id}/")
    figure = page.locator("[data-sweep-chart] figure")
    expect(figure).to_have_attribute("data-series", "3")
    assert legend(page) == [
        "lr=1e-06, train_batch_size=256",
        "lr=1e-06, train_batch_size=512",
        "lr=3e-06, train_batch_size=512 (best)",
    ]
    expect(figure).to_have_attribute("aria-label", re.compile(r"3 trials: .*Best: lr=3e-06, train_batch_size=512$"))
    drawn = figure.locator("canvas").evaluate(PIXELS_OF, [list(c) for c in COLOURS])
    # Each trial's colour is its index's: trials 0, 1 and 3 are on the canvas; trial 2's colour
    # (no line yet) is not.
    assert all(drawn[n] > 30 for n in (0, 1, 3)) and drawn[2] == 0, drawn
    shot(page, "sweep-chart")

    # Trial 2 logs its first values: the next poll redraws the chart with a fourth line.
    TrialCurve.objects.create(task=trials[2], points=[[10, 0.25], [20, 0.35]])
    expect(figure).to_have_attribute("data-series", "4", timeout=8000)
    assert legend(page)[2] == "lr=3e-06, train_batch_size=256"
    drawn = page.locator("[data-sweep-chart] figure canvas").evaluate(PIXELS_OF, [list(c) for c in COLOURS])
    assert all(count > 30 for count in drawn), drawn
    # Trial 3 kept its colour when trial 2's line came before it in the legend.
    marker = page.locator("[data-sweep-chart] .u-legend .u-series").nth(4).locator(".u-marker")
    assert marker.evaluate("m => getComputedStyle(m).borderColor") == "rgb(179, 38, 30)"


def test_the_table_sorts_by_the_metric_and_the_other_columns(
    signed_in_page: Page, sweep_and_trials: tuple[Sweep, list[Task]]
) -> None:
    page = signed_in_page
    sweep, trials = sweep_and_trials
    ids = [task.task_id for task in trials]
    page.goto(f"/sweeps/{sweep.sweep_id}/")
    table = page.locator("table.sweep-trials")
    expect(table.locator("tr[data-best]")).to_have_attribute("data-trial", ids[3])
    assert column(page, 1) == ids  # trial order
    # Best (columns: #, task, lr, batch, state, step, best, last): a max metric, best first; the
    # trial with no value last.
    best = table.get_by_role("button", name="Best")
    best.click()
    expect(table.locator("th[aria-sort='descending']")).to_have_text("Best")
    assert column(page, 1) == [ids[3], ids[0], ids[1], ids[2]]
    best.click()
    expect(table.locator("th[aria-sort='ascending']")).to_have_text("Best")
    assert column(page, 1) == [ids[1], ids[0], ids[3], ids[2]]
    shot(page, "sweep-sorted")
    table.get_by_role("button", name="Last step").click()
    assert column(page, 5) == ["20", "20", "30", ""]
    table.get_by_role("button", name="lr", exact=True).click()
    assert column(page, 2) == ["1e-06", "1e-06", "3e-06", "3e-06"]
    # The order holds when the live part is replaced: a trial ends, the poll brings the change.
    table.get_by_role("button", name="Best").click()
    Task.objects.filter(pk=trials[1].pk).update(state=S.CANCELED, early_stopped=True, finished_at=timezone.now())
    expect(table.locator(f"tr[data-trial='{ids[1]}']")).to_contain_text("stopped early", timeout=8000)
    assert column(page, 1) == [ids[3], ids[0], ids[1], ids[2]]


def test_it_cancels_a_sweep_after_confirming(signed_in_page: Page, sweep_and_trials: tuple[Sweep, list[Task]]) -> None:
    page = signed_in_page
    sweep, trials = sweep_and_trials
    Task.objects.filter(pk=trials[0].pk).update(state=S.SUCCEEDED, finished_at=timezone.now())
    page.goto(f"/sweeps/{sweep.sweep_id}/")
    page.get_by_role("button", name="Cancel sweep").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_contain_text(f"Cancel sweep {sweep.sweep_id}?")
    dialog.get_by_role("button", name="Cancel", exact=True).click()
    assert not Task.objects.filter(state=S.CANCELED).exists()

    page.get_by_role("button", name="Cancel sweep").click()
    dialog.get_by_role("button", name="Yes, cancel it").click()
    expect(page.locator(".message-success")).to_contain_text(f"Sweep {sweep.sweep_id}")
    expect(page.get_by_role("button", name="Cancel sweep")).to_have_count(0)
    states = dict(Task.objects.filter(sweep=sweep).values_list("trial_index", "state"))
    assert states == {0: S.SUCCEEDED, 1: S.CANCELED, 2: S.CANCELED, 3: S.CANCELED}
    shot(page, "sweep-canceled")


def test_a_trials_page_links_its_sweep(signed_in_page: Page, sweep_and_trials: tuple[Sweep, list[Task]]) -> None:
    page = signed_in_page
    sweep, trials = sweep_and_trials
    page.goto(f"/tasks/{trials[3].task_id}/")
    facts = page.locator("[data-sweep-facts]")
    expect(facts).to_contain_text(f"trial 3 of sweep {sweep.sweep_id} (lr-sweep)")
    expect(facts).to_contain_text(f"{LR}=3e-06")
    page.get_by_role("link", name=sweep.sweep_id).click()
    expect(page).to_have_url(re.compile(rf"/sweeps/{sweep.sweep_id}/$"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Sweeps").click()
    expect(page.locator(f"tr[data-sweep='{sweep.sweep_id}']")).to_contain_text("0 of 4 ended")


def test_it_submits_a_sweep_from_the_new_task_page(signed_in_page: Page, datasets: Path) -> None:
    page = signed_in_page
    page.get_by_role("link", name="New task").first.click()
    page.get_by_role("button", name="GRPO: learning rate × batch size").click()
    expect(page.get_by_label("Spec (YAML)")).to_have_value(re.compile(r"^# A sweep: "))
    page.get_by_role("button", name="Submit task").click()
    sweep = Sweep.objects.get()
    expect(page).to_have_url(re.compile(rf"/sweeps/{sweep.sweep_id}/$"))
    expect(page.locator(".message-success")).to_contain_text("6 trials, 2 queued now, 4 waiting their turn")
    expect(page.locator("table.sweep-trials tbody tr")).to_have_count(6)
    expect(page.locator("[data-curves-empty]")).to_be_visible()
    shot(page, "sweep-submitted")


def test_odd_params_are_text_and_a_hidden_trial_stays_hidden_when_the_page_polls(
    signed_in_page: Page, alice: User, make_task: Callable[..., Task]
) -> None:
    page = signed_in_page
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:  # an alert() an injected script would open
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    odd = ['"</script><script>alert(1)</script>', "it's <b>bold</b> & \\ \u00e9", "x" * 300]
    sweep, trials = make_sweep(
        alice, make_task, [{"trainer.experiment_name": value} for value in odd], curves=[[(10, 0.1)], [(10, 0.2)]]
    )
    page.goto(f"/sweeps/{sweep.sweep_id}/")
    figure = page.locator("[data-sweep-chart] figure")
    expect(figure).to_have_attribute("data-series", "2")
    # The values as they are, as text: in the legend, the table and the chart's description.
    assert legend(page) == [f"experiment_name={odd[0]}", f"experiment_name={odd[1]} (best)"]
    assert column(page, 2) == odd
    expect(page.locator("table.sweep-trials tbody tr").first.locator("code")).to_have_text(odd[0])
    assert page.locator("[data-sweep-chart] b").count() == 0 and dialogs == []

    # The reader hides the first trial's line; the next poll (a third trial logs) keeps it hidden.
    series = page.locator("[data-sweep-chart] .u-legend .u-series")
    series.nth(1).click()
    expect(series.nth(1)).to_have_class(re.compile(r"\bu-off\b"))
    TrialCurve.objects.create(task=trials[2], points=[[10, 0.3]])
    expect(figure).to_have_attribute("data-series", "3", timeout=8000)
    expect(page.locator("[data-sweep-chart] .u-legend .u-series").nth(1)).to_have_class(re.compile(r"\bu-off\b"))
    expect(page.locator("[data-sweep-chart] .u-legend .u-series").nth(2)).not_to_have_class(re.compile(r"\bu-off\b"))
    assert dialogs == []
