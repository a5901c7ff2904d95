// A task's page: the log tail and the training curves, read from the task API with the session
// cookie. Both poll while the task is unfinished and read once more when it ends; htmx keeps
// #task-status current (static/js/live.js), and its data-terminal and data-attempts say when
// the task has ended and which attempts exist. The log is one attempt's (the picker); the
// curves are the whole task's, across its attempts, with a dashed line where each took over.
"use strict";

const TAIL_LINES = 200;
const LOG_EVERY_MS = 2000;
const METRICS_EVERY_MS = 5000;
const CHART_HEIGHT = 170;
const STEP_INCREMENTS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
const SEAM_COLOUR = "#b45309";
const SEAM_TINT = "rgba(180, 83, 9, 0.07)";
// verl colours its console output; the log is shown as plain text.
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;

const root = document.querySelector("[data-task-id]");
const api = `/api/v2/tasks/${encodeURIComponent(root.dataset.taskId)}`;
const logText = document.getElementById("log-text");
const logState = root.querySelector("[data-log-state]");
const picker = root.querySelector("[data-attempt-picker]");
const select = document.getElementById("attempt-select");

const status = () => document.getElementById("task-status");
const finished = () => status().dataset.terminal === "true";
const attemptNumbers = () => status().dataset.attempts.split(",").filter(Boolean);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The log: "" follows the latest attempt (the API's default); a number pins one.
function query(extra = {}) {
  const params = new URLSearchParams(extra);
  if (select.value) params.set("attempt", select.value);
  return params.toString();
}

async function get(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  if (response.redirected || response.status === 401 || response.status === 403) {
    location.reload(); // signed out meanwhile: the reload lands on the sign-in page
    throw new Error("signed out");
  }
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return response;
}

// ---- The attempt selector: shown once there are several attempts.
function syncAttempts() {
  const numbers = attemptNumbers();
  const wanted = ["", ...numbers];
  const have = [...select.options].map((option) => option.value);
  if (wanted.join() !== have.join()) {
    const chosen = select.value;
    select.replaceChildren(
      new Option(`Latest (#${numbers.at(-1) ?? "-"})`, ""),
      ...numbers.map((number) => new Option(`#${number}`, number)),
    );
    select.value = wanted.includes(chosen) ? chosen : "";
  }
  picker.hidden = numbers.length < 2;
  for (const link of root.querySelectorAll("[data-log-link], [data-metrics-link]")) {
    if (link.matches("[data-log-link]")) link.search = query();
    link.hidden = numbers.length === 0; // nothing to read before the first attempt
  }
}

// ---- The log tail, kept scrolled to the end unless the reader scrolled up.
async function refreshLog() {
  if (attemptNumbers().length === 0) return;
  const text = (await (await get(`${api}/logs?${query({ tail: TAIL_LINES })}`)).text()).replace(ANSI, "");
  const atEnd = logText.scrollHeight - logText.scrollTop - logText.clientHeight < 24;
  const shown = text || "Nothing logged yet.";
  if (logText.textContent !== shown) {
    logText.textContent = shown;
    if (atEnd) logText.scrollTop = logText.scrollHeight;
  }
}

// ---- Training curves: one small uPlot chart per metric, and the step progress bar.
const charts = new Map(); // metric -> { figure, plot }
const chartBox = root.querySelector("[data-charts]");
const chartTools = root.querySelector("[data-chart-tools]");
const chartCount = root.querySelector("[data-chart-count]");
const filter = document.getElementById("metric-filter");
const showAll = root.querySelector("[data-show-all]");
const FIRST_CURVES = 6;
const progress = document.getElementById("step-progress");
const stepText = root.querySelector("[data-step-text]");
const seamText = root.querySelector("[data-seams]");
let seams = []; // where a later attempt took over the curves: { x, attempt, words }

// What people look at first: rewards and scores, then losses, then the rest by name.
function rank(metric) {
  if (/score|reward/.test(metric)) return 0;
  if (/loss/.test(metric)) return 1;
  return 2;
}

function chartWidth(figure) {
  return Math.max(figure.clientWidth - 8, 200);
}

function resize(figure) {
  const width = chartWidth(figure);
  figure.dataset.width = String(width);
  charts.get(figure.dataset.metric).plot.setSize({ width, height: CHART_HEIGHT });
}

function describe(metric, points) {
  const [step, value] = points.at(-1);
  const across = seams.map((seam) => `; attempt ${seam.attempt} from step ${seam.x + 0.5}`).join("");
  return `${metric}: ${points.length} points, last ${value.toPrecision(4)} at step ${step}${across}`;
}

// The API gives each attempt's first and last step. A later attempt's steps replace an
// earlier one's, so attempt N took over the curves at its first step, unless a still later
// attempt started at or before it (and replaced it in turn). The line sits half a step
// before, between the last point of the one and the first of the other.
function seamsOf(spans) {
  const ran = spans.filter((span) => span.first_step !== null);
  return ran
    .slice(1)
    .filter((span, i) => ran.slice(i + 2).every((later) => later.first_step > span.first_step))
    .map((span) => ({
      x: span.first_step - 0.5,
      attempt: span.attempt_no,
      words:
        span.resumed_from_step === null
          ? `attempt ${span.attempt_no} started from scratch`
          : `attempt ${span.attempt_no} resumed from step ${span.resumed_from_step}`,
    }));
}

function showSeams(spans) {
  seams = seamsOf(spans);
  seamText.hidden = seams.length === 0;
  const ran = spans.filter((span) => span.first_step !== null).length;
  const words = seams.map((seam) => seam.words).join("; ");
  seamText.textContent = `The curves run across ${ran} attempts; a dashed line marks where one took over: ${words}.`;
}

// A uPlot hook: the seams, drawn on the chart's canvas (no DOM, no styles: CSP-safe). Each
// later attempt's stretch is tinted in turn, so that three attempts read as three bands.
function drawSeams(u) {
  const { ctx } = u;
  const { left, top, width, height } = u.bbox;
  const px = uPlot.pxRatio;
  const xs = seams.map((seam) => Math.round(u.valToPos(seam.x, "x", true)));
  ctx.save();
  ctx.fillStyle = SEAM_TINT;
  xs.forEach((x, i) => {
    if (i % 2 === 1) return;
    const from = Math.max(x, left);
    const to = Math.min(xs[i + 1] ?? left + width, left + width);
    if (to > from) ctx.fillRect(from, top, to - from, height);
  });
  ctx.lineWidth = px;
  ctx.setLineDash([4 * px, 3 * px]);
  ctx.font = `${11 * px}px system-ui, sans-serif`;
  ctx.textAlign = "left"; // uPlot leaves the context as its axes last set it
  ctx.textBaseline = "top";
  let labelEnd = -Infinity; // where the last label ended: a close seam's label goes a row lower
  let row = 0;
  seams.forEach((seam, i) => {
    const x = xs[i];
    if (x < left || x > left + width) return;
    ctx.strokeStyle = SEAM_COLOUR;
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    const label = `attempt ${seam.attempt}`;
    row = x + 4 * px < labelEnd ? row + 1 : 0;
    labelEnd = x + 4 * px + ctx.measureText(label).width + 4 * px;
    ctx.fillStyle = SEAM_COLOUR;
    ctx.fillText(label, x + 4 * px, top + (3 + row * 13) * px);
  });
  ctx.restore();
}

function makeChart(metric, data) {
  const figure = document.createElement("figure");
  figure.dataset.metric = metric;
  figure.setAttribute("role", "img");
  chartBox.append(figure);
  figure.dataset.width = String(chartWidth(figure));
  const plot = new uPlot(
    {
      title: metric,
      width: Number(figure.dataset.width),
      height: CHART_HEIGHT,
      scales: { x: { time: false } },
      // Steps are whole numbers: no 1.5 on the axis.
      axes: [{ size: 30, incrs: STEP_INCREMENTS }, { size: 56 }],
      series: [{ label: "step" }, { label: "value", stroke: "#0172ad", width: 1.5, points: { size: 4 } }],
      cursor: { drag: { x: false, y: false } },
      hooks: { draw: [drawSeams] },
    },
    data,
    figure,
  );
  return { figure, plot };
}

function drawCharts(series) {
  const metrics = Object.keys(series).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  if (metrics.join() !== [...charts.keys()].join()) {
    for (const { plot, figure } of charts.values()) {
      plot.destroy();
      figure.remove();
    }
    charts.clear();
  }
  for (const metric of metrics) {
    const points = series[metric];
    const data = [points.map(([step]) => step), points.map(([, value]) => value)];
    let chart = charts.get(metric);
    if (chart) chart.plot.setData(data);
    else charts.set(metric, (chart = makeChart(metric, data)));
    chart.figure.setAttribute("aria-label", describe(metric, points));
  }
  chartTools.hidden = metrics.length === 0;
  root.querySelector("[data-charts-empty]").hidden = metrics.length > 0;
  applyFilter();
}

// verl prints dozens of metrics: the first few (by rank) show until the reader asks for more,
// so the log below stays in reach.
function applyFilter() {
  const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
  const limit = words.length > 0 || showAll.getAttribute("aria-pressed") === "true" ? Infinity : FIRST_CURVES;
  let shown = 0;
  for (const [metric, { figure }] of charts) {
    const matches = words.length === 0 || words.some((word) => metric.toLowerCase().includes(word));
    figure.hidden = !matches || shown >= limit;
    if (!figure.hidden) {
      shown += 1;
      // The window may have changed size while it was hidden (resizing skips hidden charts).
      if (figure.dataset.width !== String(chartWidth(figure))) resize(figure);
    }
  }
  chartCount.textContent = `${shown} of ${charts.size} curves`;
  showAll.hidden = words.length > 0 || charts.size <= FIRST_CURVES;
}

function showProgress({ last_step: last, total_steps: total }) {
  if (last === null) {
    progress.value = 0;
    progress.max = 1;
    stepText.textContent = "No training step logged yet.";
  } else if (total) {
    progress.max = total;
    progress.value = Math.min(last, total);
    stepText.textContent = `Step ${last} of ${total}`;
  } else {
    progress.removeAttribute("value"); // indeterminate: the total is not known
    stepText.textContent = `Step ${last} (total unknown)`;
  }
}

async function refreshMetrics() {
  if (attemptNumbers().length === 0) return;
  // The whole task: the API's default runs the curves across attempts.
  const body = await (await get(`${api}/metrics`)).json();
  showProgress(body);
  showSeams(body.attempts);
  drawCharts(body.series);
}

// ---- Polling: each loop reads once more after the task has ended, then stops.
async function poll(refresh, everyMs, what) {
  for (;;) {
    const done = finished();
    if (!document.hidden || done) {
      try {
        await refresh();
        const ended = done && what === "log" && attemptNumbers().length > 0;
        if (what === "log") logState.textContent = ended ? "The task has ended: this is the end of its log." : "";
      } catch (error) {
        if (error.message === "signed out") return;
        logState.textContent = `Could not read the ${what} (${error.message}); trying again.`;
      }
    }
    if (done) return;
    await sleep(everyMs);
  }
}

syncAttempts();
document.addEventListener("htmx:afterSettle", syncAttempts);
select.addEventListener("change", () => {
  syncAttempts();
  refreshLog().catch(() => {});
});
filter.addEventListener("input", applyFilter);
showAll.addEventListener("click", () => {
  const pressed = showAll.getAttribute("aria-pressed") === "true";
  showAll.setAttribute("aria-pressed", String(!pressed));
  showAll.textContent = pressed ? "Show all curves" : "Show the first few";
  applyFilter();
});
let resizeTimer;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    for (const { figure } of charts.values()) if (!figure.hidden) resize(figure);
  }, 150);
});

poll(refreshLog, LOG_EVERY_MS, "log");
poll(refreshMetrics, METRICS_EVERY_MS, "curves");
