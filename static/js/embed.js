// Inside an iframe embed: tell the host page how tall the content is (postMessage
// {type: "parallelism-lab:height", height}), whenever it changes; the embed code's short
// script resizes the iframe. With controls=1 the lab's form swaps this embed's body (at
// this embed's URL) instead of the lesson's diagram section, and never touches history.
(function () {
  "use strict";

  var last = 0;
  // The body's own height (not the document's scrollHeight, which is never less than the
  // iframe's current height, so an embed could grow but never shrink to fit).
  function contentHeight() {
    var body = document.body, style = window.getComputedStyle(body);
    return Math.ceil(body.getBoundingClientRect().height +
      parseFloat(style.marginTop) + parseFloat(style.marginBottom));
  }

  function report() {
    if (!document.body) return;
    var height = contentHeight();
    if (height === last || window.parent === window) return;
    last = height;
    window.parent.postMessage({ type: "parallelism-lab:height", height: height }, "*");
  }

  // A form that replaces the lesson's whole bench, controls included (EP09's recipe: a new
  // recipe brings its own degrees into every field), cannot swap only this embed's body: the
  // other form would keep the old recipe's fields and send them back with the next change.
  // In an embed it loads the embed afresh at the new state, its theme and controls kept.
  function reloadWith(form) {
    var here = new URLSearchParams(window.location.search);
    var next = new URLSearchParams();
    ["theme", "controls"].forEach(function (key) { if (here.has(key)) next.set(key, here.get(key)); });
    new FormData(form).forEach(function (value, key) { next.set(key, value); });
    (form.getAttribute("hx-include") || "").split(",").forEach(function (selector) {
      var el = selector.trim() && document.querySelector(selector.trim());
      if (el && el.name) next.set(el.name, el.value);
    });
    window.location.assign(window.location.pathname + "?" + next.toString());
  }

  function retarget() {
    Array.prototype.forEach.call(document.querySelectorAll("form.controls"), function (form) {
      if (form.getAttribute("hx-target") === "#bench") {
        ["hx-get", "hx-target", "hx-swap", "hx-push-url", "hx-trigger"].forEach(function (a) {
          form.removeAttribute(a);
        });
        form.addEventListener("change", function () { reloadWith(form); });
        form.addEventListener("submit", function (event) { event.preventDefault(); reloadWith(form); });
        return;
      }
      form.setAttribute("data-embed", "true");
      form.setAttribute("hx-get", window.location.pathname);
      form.setAttribute("action", window.location.pathname);
      form.setAttribute("hx-target", "#embed-body");
      form.setAttribute("hx-swap", "innerHTML");
      form.setAttribute("hx-push-url", "false");
    });
  }

  // Runs before htmx processes the page (both scripts are deferred; htmx starts on
  // DOMContentLoaded, which fires after every deferred script has run).
  retarget();
  window.addEventListener("load", report);
  document.addEventListener("DOMContentLoaded", function () {
    if (window.ResizeObserver) new ResizeObserver(report).observe(document.body);
  });
  document.addEventListener("htmx:afterSettle", report);
  report();
})();
