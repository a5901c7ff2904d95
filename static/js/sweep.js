// A sweep's page: every trial's curve of the sweep's metric on one uPlot chart (its params in
// the legend, the best trial's line heavier), and the trials' table sorted in the browser by
// any column. htmx replaces #sweep-live while the sweep runs (static/js/live.js); the chart is
// drawn again from the curves the new part carries (#sweep-curves), and the table sorted again.
"use strict";

const CHART_HEIGHT = 320;
const STEP_INCREMENTS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
const PALETTE = ["#0172ad", "#d08c00", "#2e8540", "#b3261e", "#6f42c1", "#00838f", "#8d6e63", "#c2185b"];

// A colour per trial, by its index in the sweep (a line keeps its colour as others appear): the
// palette, then hues spread by the golden angle (no two alike).
function colour(n) {
  return n < PALETTE.length ? PALETTE[n] : `hsl(${Math.round((n * 137.508) % 360)}, 65%, 42%)`;
}

let plot = null;
// The trials the reader hid by a click on their legend entry: a poll's redraw keeps them hidden
// (with many trials, hiding all but a few is how one compares them).
const hidden = new Set();

function drawChart() {
  const box = document.querySelector("[data-sweep-chart]");
  const source = document.getElementById("sweep-curves");
  if (plot) {
    plot.destroy();
    plot = null;
  }
  if (!box || !source) return;
  box.replaceChildren();
  const { metric, trials } = JSON.parse(source.textContent);
  if (!trials.length) return;
  // uPlot wants one x array shared by every series: the steps any trial logged, each trial's
  // value at a step it did not log is null (the line spans the gap).
  const steps = [...new Set(trials.flatMap((trial) => trial.points.map(([step]) => step)))].sort((a, b) => a - b);
  const column = new Map(steps.map((step, i) => [step, i]));
  const ys = trials.map((trial) => {
    const y = steps.map(() => null);
    for (const [step, value] of trial.points) y[column.get(step)] = value;
    return y;
  });
  const series = trials.map((trial) => ({
    label: trial.best ? `${trial.label} (best)` : trial.label,
    stroke: colour(trial.index),
    width: trial.best ? 3 : 1.5,
    show: !hidden.has(trial.task_id),
    spanGaps: true,
    points: { size: 5 },
  }));
  const figure = document.createElement("figure");
  figure.setAttribute("role", "img");
  const best = trials.find((trial) => trial.best);
  figure.setAttribute(
    "aria-label",
    `${metric} by step, ${trials.length} trial${trials.length === 1 ? "" : "s"}: ${trials.map((t) => t.label).join("; ")}` +
      (best ? `. Best: ${best.label}` : ""),
  );
  figure.dataset.series = String(trials.length);
  box.append(figure);
  plot = new uPlot(
    {
      width: Math.max(box.clientWidth - 8, 320),
      height: CHART_HEIGHT,
      scales: { x: { time: false } },
      axes: [{ size: 30, incrs: STEP_INCREMENTS, label: "step" }, { size: 56 }],
      series: [{ label: "step" }, ...series],
      cursor: { drag: { x: false, y: false } },
      hooks: {
        setSeries: [
          (u, index) => {
            if (index == null) return;
            const id = trials[index - 1].task_id;
            if (u.series[index].show) hidden.delete(id);
            else hidden.add(id);
          },
        ],
      },
    },
    [steps, ...ys],
    figure,
  );
}

// ---- The table: a click on a column's head sorts by it; again, the other way. The metric's
// columns sort best first on the first click (highest for max, lowest for min). Trials with
// no value in the column stay last either way.
let sorted = null; // { column, descending }

function cellValue(row, column) {
  return row.cells[column].dataset.value ?? "";
}

function compare(a, b) {
  const x = Number(a);
  const y = Number(b);
  if (a !== "" && b !== "" && Number.isFinite(x) && Number.isFinite(y)) return x - y;
  return a.localeCompare(b);
}

function applySort() {
  const table = document.querySelector("table[data-sortable]");
  if (!table) return;
  const heads = [...table.tHead.rows[0].cells];
  heads.forEach((head, i) => {
    if (sorted && i === sorted.column) head.setAttribute("aria-sort", sorted.descending ? "descending" : "ascending");
    else head.removeAttribute("aria-sort");
  });
  if (!sorted) return;
  const body = table.tBodies[0];
  const rows = [...body.rows];
  const sign = sorted.descending ? -1 : 1;
  rows.sort((r1, r2) => {
    const a = cellValue(r1, sorted.column);
    const b = cellValue(r2, sorted.column);
    if (a === "" || b === "") return (a === "") - (b === "");
    return sign * compare(a, b) || compare(cellValue(r1, 0), cellValue(r2, 0));
  });
  body.append(...rows);
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("table[data-sortable] th button.sort");
  if (!button) return;
  const head = button.closest("th");
  const column = head.cellIndex;
  if (sorted && sorted.column === column) sorted = { column, descending: !sorted.descending };
  else sorted = { column, descending: head.dataset.mode === "max" };
  applySort();
});

// After htmx replaced the live part (the page's only one): the new curves, and the reader's
// order kept. On the swap itself, not the settle a moment later: the rows never show unsorted.
document.addEventListener("htmx:afterSwap", () => {
  drawChart();
  applySort();
});

let resizeTimer;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(drawChart, 150);
});

drawChart();
