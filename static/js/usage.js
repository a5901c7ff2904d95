// The usage page's chart: GPU-hours per group per day, stacked (each group's band sits on the
// ones before it), drawn with the vendored uPlot from the data the page carries (#usage-data).
"use strict";

const COLOURS = ["#0172ad", "#d08c00", "#2e8540", "#b3261e", "#6f42c1", "#00838f", "#8d6e63", "#546e7a"];
const box = document.querySelector("[data-usage-chart]");
const { days, groups } = JSON.parse(document.getElementById("usage-data").textContent);

function draw() {
  if (!groups.length) return;
  // x: each day's midnight (UTC), in seconds, as uPlot's time scale reads it.
  const xs = days.map((day) => Date.parse(`${day}T00:00:00Z`) / 1000);
  const stacked = [];
  let below = days.map(() => 0);
  for (const group of groups) {
    below = below.map((sum, n) => sum + group.gpu_hours[n]);
    stacked.push(below);
  }
  // The topmost band first, so that each one is filled down to the one below it.
  const series = groups.map((group, n) => ({
    label: group.name,
    stroke: COLOURS[n % COLOURS.length],
    fill: `${COLOURS[n % COLOURS.length]}66`,
    width: 1.5,
    // The group's own GPU-hours in the legend, not the running total the band is drawn at.
    value: (u, v, s, idx) => (idx == null ? "—" : `${group.gpu_hours[idx]} GPU-h`),
  }));
  const bands = groups.slice(1).map((_, n) => ({ series: [n + 2, n + 1] }));
  const figure = document.createElement("figure");
  figure.setAttribute("role", "img");
  figure.setAttribute(
    "aria-label",
    `GPU-hours per day from ${days[0]} to ${days[days.length - 1]}, stacked by group: ${groups.map((g) => g.name).join(", ")}`,
  );
  box.append(figure);
  new uPlot(
    {
      width: Math.max(320, box.clientWidth || 800),
      height: 260,
      scales: { x: { time: true } },
      axes: [{ size: 30 }, { size: 56, label: "GPU-hours" }],
      series: [{ label: "day" }, ...series],
      bands,
      cursor: { drag: { x: false, y: false } },
    },
    [xs, ...stacked],
    figure,
  );
}

draw();
