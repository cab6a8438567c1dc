// EP08's auto-planner scatter (templates/partials/_plan.html): a click on a plan's point
// loads that plan, as its row's link in the table below does. Each point's customdata is
// that link (app/charts/plan.py); lab.js fires "lab:drawn" once plotly has drawn the chart.
(function () {
  "use strict";

  function load(url) {
    var links = document.querySelectorAll("#recipe-plan a[data-testid=plan-link]");
    var link = Array.prototype.find.call(links, function (a) { return a.getAttribute("href") === url; });
    if (link) link.click();  // the same navigation as the table's link (htmx-boosted or not)
    else window.location.assign(url);
  }

  document.addEventListener("lab:drawn", function (event) {
    var chart = event.target;
    if (!chart || chart.id !== "recipe-plan-chart" || chart._planClick || !chart.on) return;
    chart._planClick = true;
    chart.on("plotly_click", function (data) {
      var point = data && data.points && data.points[0];
      if (point && point.customdata) load(point.customdata);
    });
  });
})();
