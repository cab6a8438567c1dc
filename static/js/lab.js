// Parallelism Lab's one script. It draws every figure it finds in the page or in content htmx
// swaps in (a <script type="application/json" class="figure" data-target="ID">), updating the
// chart in place with Plotly.react, and keeps dependent controls consistent. Fragments carry
// figure data only, never figure code.
(function () {
  "use strict";

  var PLOT_CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function within(root, selector) {
    var found = Array.prototype.slice.call(root.querySelectorAll ? root.querySelectorAll(selector) : []);
    if (root.matches && root.matches(selector)) found.unshift(root);
    return found;
  }

  function draw(root) {
    if (!window.Plotly) return;
    within(root, "script.figure[data-target]").forEach(function (script) {
      var el = document.getElementById(script.dataset.target);
      if (!el) return;
      var fig = JSON.parse(script.textContent);
      var config = Object.assign({}, PLOT_CONFIG, fig.config || {});
      window.Plotly.react(el, fig.data, fig.layout, config).then(function () {
        // A hook for tests and assistive tech: what the chart now shows.
        el.dataset.drawn = script.dataset.state || "";
        if (fig.summary) el.setAttribute("aria-label", fig.summary);
      });
    });
  }

  // <select data-filter-by="mode">: only options whose data-when matches the mode are offered.
  function controlValue(form, name) {
    var checked = form.querySelector('[name="' + name + '"]:checked');
    if (checked) return checked.value;
    var el = form.querySelector('[name="' + name + '"]');
    return el ? el.value : "";
  }

  function syncDependents(form) {
    within(form, "select[data-filter-by]").forEach(function (select) {
      var want = controlValue(form, select.dataset.filterBy);
      var firstOk = null;
      Array.prototype.forEach.call(select.options, function (opt) {
        var ok = !opt.dataset.when || opt.dataset.when === want;
        opt.disabled = !ok;
        opt.hidden = !ok;
        if (ok && firstOk === null) firstOk = opt;
      });
      var current = select.options[select.selectedIndex];
      if (current && current.disabled && firstOk) select.value = firstOk.value;
    });
    // <input data-enabled-when="model=custom">: disabled (so not submitted) otherwise.
    within(form, "[data-enabled-when]").forEach(function (input) {
      var rule = input.dataset.enabledWhen.split("=");
      input.disabled = controlValue(form, rule[0]) !== rule[1];
    });
    within(form, "output[for]").forEach(function (out) {
      var src = form.querySelector("#" + out.htmlFor);
      if (src) out.value = src.value;
    });
  }

  function init(root) {
    within(root, "form.controls").forEach(syncDependents);
    draw(root);
  }

  // Runs before htmx reads the form (htmx waits for its trigger delay), so a mode switch
  // sends a recipe that belongs to the new mode.
  document.addEventListener("input", function (event) {
    var form = event.target.form;
    if (form && form.classList.contains("controls")) syncDependents(form);
  }, true);

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-target]");
    if (!button) return;
    var source = document.getElementById(button.dataset.copyTarget);
    source.select();
    var done = function () { button.textContent = "Copied"; };
    if (navigator.clipboard) navigator.clipboard.writeText(source.value).then(done, done);
    else { document.execCommand("copy"); done(); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.classList.add("js");
    init(document);
    if (window.htmx) window.htmx.onLoad(function (elt) { if (elt !== document.body) init(elt); });
  });
})();
