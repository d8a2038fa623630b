// Kappa over grader versions on the calibration page, from the JSON the page embeds (no
// inline script; the vendored Chart.js). The 95% interval is the band between two lines; a
// version whose kappa fell below the previous version's interval is drawn as a red triangle.
// The table under each grader lists the same points, with the flag's sentence.
(function () {
  const source = document.getElementById("drift-chart-data");
  if (!source || typeof Chart === "undefined") return;
  const charts = JSON.parse(source.textContent);
  document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
    const c = charts[Number(canvas.dataset.chart)];
    if (!c) return;
    new Chart(canvas, {
      type: "line",
      data: {
        labels: c.labels,
        datasets: [
          { label: "95% interval, low", data: c.low, borderColor: "rgba(59,74,107,0.3)", pointRadius: 0, fill: false },
          { label: "95% interval, high", data: c.high, borderColor: "rgba(59,74,107,0.3)", backgroundColor: "rgba(59,74,107,0.12)", pointRadius: 0, fill: "-1" },
          {
            label: "kappa",
            data: c.kappa,
            borderColor: "#3b4a6b",
            pointStyle: c.worse.map((w) => (w ? "triangle" : "circle")),
            pointRadius: c.worse.map((w) => (w ? 8 : 4)),
            pointBackgroundColor: c.worse.map((w) => (w ? "#b00020" : "#3b4a6b")),
          },
        ],
      },
      options: {
        animation: false,
        spanGaps: true,
        scales: { y: { min: -1, max: 1, title: { display: true, text: "kappa" } } },
        plugins: {
          tooltip: {
            callbacks: {
              afterLabel: (item) => (c.worse[item.dataIndex] && item.datasetIndex === 2 ? "worse than the version before" : ""),
            },
          },
        },
      },
    });
  });
})();
