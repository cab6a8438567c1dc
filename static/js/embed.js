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

  function retarget() {
    Array.prototype.forEach.call(document.querySelectorAll("form.controls"), function (form) {
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
