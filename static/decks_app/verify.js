// Draws the Verify batch charts from the JSON the page embeds (no inline script; works
// offline with the vendored Chart.js). Redrawn after each swap of the batch: an htmx
// request's, or the batch session's socket's (the live path, see live.js).
(function () {
  const charts = [];
  function draw() {
    const source = document.getElementById("verify-chart-data");
    if (!source || typeof Chart === "undefined") return;
    while (charts.length) charts.pop().destroy();
    const data = JSON.parse(source.textContent);
    // The bins come from the server (gambit core's histogram): one point wide, the pass
    // threshold an edge, so no bin mixes passing and failing scores.
    const bins = data.bins || [];
    const graders = Object.keys(data.histogram || {});
    const scores = document.getElementById("chart-scores");
    if (scores && bins.length) {
      charts.push(new Chart(scores, {
        type: "bar",
        data: {
          labels: bins.map((b) => b.label + (b.passes ? " (pass)" : " (fail)")),
          datasets: graders.map((g) => ({ label: g, data: data.histogram[g] })),
        },
        options: { animation: false, scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
      }));
    }
    const spread = document.getElementById("chart-spread");
    if (spread) {
      const scenarios = [...new Set(Object.values(data.spread).flatMap((s) => Object.keys(s)))];
      charts.push(new Chart(spread, {
        type: "bar",
        data: {
          labels: scenarios,
          datasets: Object.entries(data.spread).flatMap(([g, per]) => [
            { label: g + " mean", data: scenarios.map((s) => (per[s] || {}).mean ?? null) },
            { label: g + " min", type: "line", showLine: false, data: scenarios.map((s) => (per[s] || {}).min ?? null) },
            { label: g + " max", type: "line", showLine: false, data: scenarios.map((s) => (per[s] || {}).max ?? null) },
          ]),
        },
        options: { animation: false, scales: { y: { min: -3, max: 3 } } },
      }));
    }
    const runs = document.getElementById("chart-runs");
    if (runs) {
      charts.push(new Chart(runs, {
        type: "bar",
        data: {
          labels: data.runs.map((r) => r.label),
          datasets: [
            { label: "latency (ms)", data: data.runs.map((r) => r.durationMs), yAxisID: "ms" },
            { label: "tokens", type: "line", data: data.runs.map((r) => r.tokens), yAxisID: "tokens" },
          ].concat(data.runs.some((r) => r.cost != null) ? [
            { label: "cost ($)", type: "line", data: data.runs.map((r) => r.cost), yAxisID: "cost" },
          ] : []),
        },
        options: {
          animation: false,
          scales: {
            ms: { position: "left", beginAtZero: true },
            tokens: { position: "right", beginAtZero: true },
            cost: { position: "right", beginAtZero: true, display: data.runs.some((r) => r.cost != null) },
          },
        },
      }));
    }
  }
  document.addEventListener("DOMContentLoaded", draw);
  document.body.addEventListener("htmx:afterSettle", draw);
  document.body.addEventListener("htmx:wsAfterMessage", draw);
})();
