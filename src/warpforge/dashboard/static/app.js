// warpforge dashboard: draws Plotly figures from the JSON specs the server embedded, and refreshes the
// campaign rows of live pages by polling (no framework: plain fetch, ~40 lines; CSP allows only this file).
(function () {
  "use strict";

  function drawFigures() {
    if (typeof Plotly === "undefined") return;
    document.querySelectorAll("div.plot[data-spec]").forEach(function (div) {
      var holder = document.getElementById(div.dataset.spec);
      if (!holder) return;
      var spec = JSON.parse(holder.textContent);
      Plotly.newPlot(div, spec.data, spec.layout, {responsive: true, displaylogo: false});
    });
  }

  function poll() {
    var period = parseInt(document.body.dataset.refresh || "0", 10);
    if (!period) return;
    var rows = document.getElementById("campaign-rows");
    setInterval(function () {
      if (document.hidden) return;
      if (rows && rows.dataset.partial) {
        // The fragment is rendered by the same autoescaped template as the full page.
        fetch(rows.dataset.partial, {headers: {"Accept": "text/html"}})
          .then(function (r) { return r.ok ? r.text() : null; })
          .then(function (text) { if (text !== null) rows.innerHTML = text; });
      } else {
        window.location.reload();
      }
    }, period);
  }

  function autosubmit() {
    document.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
      sel.addEventListener("change", function () { sel.form.submit(); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () { drawFigures(); poll(); autosubmit(); });
})();
