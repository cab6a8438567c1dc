// Progress without accounts: which steps a student has tried and which drills they have
// solved, kept in this browser's localStorage only (nothing is sent to the server). The home
// page shows it per episode and exports or imports it as a JSON file (a student moving to
// another computer, or handing it in).
//
// A step counts as done once one of its "try it" links is followed after its prediction is
// committed (or its why opened: lab.js drops the links' "before-guess" then), so a link
// followed before the guess ticks nothing (round-5b cold readings of EP06 and EP08); a
// drill once it is answered right (a revealed answer does not count).
(function () {
  "use strict";

  var FORMAT = "parallelism-lab-progress";
  var VERSION = 1;
  var basePath = document.documentElement.dataset.basePath || "";
  var KEY = "lab-progress" + (basePath ? ":" + basePath : "");

  function empty() { return { format: FORMAT, version: VERSION, episodes: {} }; }

  function load() {
    try {
      var data = JSON.parse(localStorage.getItem(KEY) || "null");
      return valid(data) ? data : empty();
    } catch (e) { return empty(); }
  }

  function save(data) {
    try { localStorage.setItem(KEY, JSON.stringify(data)); } catch (e) { /* storage off */ }
  }

  function ids(list) {
    return Array.isArray(list) && list.every(function (x) {
      return typeof x === "string" && x.length <= 80;
    });
  }

  // The only shape accepted back from a file: an object of episodes, each with lists of ids.
  function valid(data) {
    if (!data || data.format !== FORMAT || data.version !== VERSION) return false;
    if (!data.episodes || typeof data.episodes !== "object") return false;
    return Object.keys(data.episodes).every(function (slug) {
      var ep = data.episodes[slug];
      return /^[a-z0-9-]{1,40}$/.test(slug) && ep && ids(ep.steps) && ids(ep.drills) &&
        Number.isInteger(ep.totalSteps || 0) && Number.isInteger(ep.totalDrills || 0);
    });
  }

  function episode(data, slug) {
    if (!data.episodes[slug]) data.episodes[slug] = { steps: [], drills: [], totalSteps: 0, totalDrills: 0 };
    return data.episodes[slug];
  }

  function mark(slug, kind, id) {
    var data = load();
    var ep = episode(data, slug);
    if (ep[kind].indexOf(id) < 0) ep[kind].push(id);
    save(data);
    paintLesson();
  }

  function lesson() { return document.querySelector(".lesson[data-episode]"); }

  // On a lesson page: record how many steps and drills it has, and tick the done ones.
  function paintLesson() {
    var node = lesson();
    if (!node) return;
    var slug = node.dataset.episode;
    var data = load();
    var ep = episode(data, slug);
    ep.totalSteps = node.querySelectorAll("section.step[id]:not(#step-drill)").length;
    ep.totalDrills = node.querySelectorAll("form.drill").length;
    save(data);
    node.querySelectorAll("section.step[id]").forEach(function (step) {
      step.classList.toggle("done", ep.steps.indexOf(step.id) >= 0);
    });
    node.querySelectorAll("form.drill").forEach(function (form) {
      form.classList.toggle("done", ep.drills.indexOf(form.id.replace(/^drill-/, "")) >= 0);
    });
  }

  function paintHome() {
    var data = load();
    document.querySelectorAll("[data-progress-for]").forEach(function (slot) {
      var ep = data.episodes[slot.dataset.progressFor];
      if (!ep || (!ep.steps.length && !ep.drills.length)) { slot.textContent = ""; return; }
      var parts = [ep.steps.length + " of " + (ep.totalSteps || ep.steps.length) + " steps tried"];
      if (ep.totalDrills || ep.drills.length) {
        parts.push(ep.drills.length + " of " + (ep.totalDrills || ep.drills.length) + " drills solved");
      }
      slot.textContent = parts.join(", ");
    });
  }

  function exportFile() {
    var blob = new Blob([JSON.stringify(load(), null, 2)], { type: "application/json" });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = "parallelism-lab-progress.json";
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(link.href); }, 0);
  }

  function importFile(file, status) {
    var reader = new FileReader();
    reader.onload = function () {
      var data;
      try { data = JSON.parse(reader.result); } catch (e) { data = null; }
      if (!valid(data)) {
        status.textContent = "That file is not a Parallelism Lab progress file; nothing changed.";
        return;
      }
      var mine = load();
      Object.keys(data.episodes).forEach(function (slug) {  // merge: keep what either has
        var ep = episode(mine, slug), theirs = data.episodes[slug];
        ["steps", "drills"].forEach(function (kind) {
          theirs[kind].forEach(function (id) { if (ep[kind].indexOf(id) < 0) ep[kind].push(id); });
        });
        ep.totalSteps = Math.max(ep.totalSteps, theirs.totalSteps || 0);
        ep.totalDrills = Math.max(ep.totalDrills, theirs.totalDrills || 0);
      });
      save(mine);
      paintHome();
      status.textContent = "Progress imported.";
    };
    reader.readAsText(file);
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.try");
    var step = link && link.closest("section.step[id]");
    var node = lesson();
    // A link under a prediction never gets here before the guess (lab.js holds it): a
    // followed try link ticks its step.
    if (step && node) mark(node.dataset.episode, "steps", step.id);
    if (event.target.id === "progress-export") exportFile();
  });

  function markSolved() {
    var node = lesson();
    document.querySelectorAll("form.drill .drill-feedback.right").forEach(function (feedback) {
      var drill = feedback.closest("form.drill");
      var slug = node ? node.dataset.episode : drill.dataset.episode;
      if (slug) mark(slug, "drills", drill.id.replace(/^drill-/, ""));
    });
  }
  document.addEventListener("htmx:afterSwap", markSolved);

  document.addEventListener("change", function (event) {
    if (event.target.id === "progress-import" && event.target.files.length) {
      importFile(event.target.files[0], document.getElementById("progress-status"));
      event.target.value = "";
    }
  });

  function start() {
    paintLesson();
    markSolved();
    paintHome();
    var tools = document.getElementById("progress-tools");
    if (tools) tools.hidden = false;
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
