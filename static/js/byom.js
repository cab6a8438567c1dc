// Bring your own model (templates/partials/_byom.html): when the server has parsed a pasted
// config.json into #byom-result, put its code in the lab's model select (adding the option
// "Your model (…)" if the select lacks it) and fire the select's input event, so lab.js
// redraws and pushes the URL exactly as for any model change.
(function () {
  "use strict";

  function useModel(code, label) {
    var bench = document.getElementById("bench");
    var form = bench && bench.querySelector("form.controls");
    var select = form && form.querySelector("select[name=model]");
    if (!select) return;
    var option = Array.prototype.find.call(select.options, function (o) { return o.value === code; });
    if (!option) {
      option = new Option(label, code);
      select.add(option);
    }
    if (select.value === code) return;
    select.value = code;
    select.dispatchEvent(new Event("input", { bubbles: true }));
    select.dispatchEvent(new Event("change", { bubbles: true }));
  }

  // The page's state now, not when the form was drawn: the "open it as a link" URL keeps
  // every control moved since.
  document.addEventListener("htmx:configRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "byom-form") {
      event.detail.parameters.return_to = window.location.pathname + window.location.search;
    }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (!target || target.id !== "byom-result") return;
    var parsed = target.querySelector("[data-use-model]");
    if (parsed) useModel(parsed.dataset.useModel, parsed.dataset.modelLabel);
  });
})();
