// The live class, on the student's side (app/classroom): while this browser is joined to a
// class (the lab-class-csrf cookie, set by /join next to the HttpOnly session cookie), each
// checked drill answer, each step opened and each "try it" click is also sent to the class,
// with that token as the CSRF header. Without a class nothing is sent, as before. A class bar
// at the top of each page (polled, htmx) shows the class, where the instructor holds it, and
// each revealed drill's spread beside the student's own answer.
(function () {
  "use strict";

  var basePath = document.documentElement.dataset.basePath || "";
  var TOKEN = "lab-class-csrf";
  var BAR_POLL = "every 10s";  // 500 students: 50 requests a second

  function token() {
    var found = document.cookie.split("; ").filter(function (c) {
      return c.indexOf(TOKEN + "=") === 0;
    })[0];
    return found ? decodeURIComponent(found.slice(TOKEN.length + 1)) : "";
  }

  // An answer is resent until the server acknowledges it: after a network error, a 5xx or a
  // 429 (waiting its Retry-After when longer), at most TRIES times over about 30 s, each
  // under the answer's own id (made once per answer), which the server stores once however
  // often it arrives. Any other 4xx is the server refusing it: not resent. Progress events
  // (steps opened, try-it clicks) are sent once, fire-and-forget: the next one says the same.
  var TRIES = 4;
  var BACKOFF_MS = [2000, 8000, 20000];  // waits between tries: 30 s in all

  function answerId() {
    if (window.crypto && window.crypto.randomUUID) return window.crypto.randomUUID();
    var bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) {
      return (b + 256).toString(16).slice(1);
    }).join("");
  }

  function send(path, fields, tries) {
    var csrf = token();
    if (!csrf) return;  // not in a class (or it ended): nothing leaves this browser
    var done = 0;
    function retry(waitMs) {
      done += 1;
      if (done >= (tries || 1)) return;  // given up: the answer stays in this browser only
      var backoff = BACKOFF_MS[Math.min(done - 1, BACKOFF_MS.length - 1)];
      setTimeout(attempt, Math.max(waitMs, backoff));
    }
    function attempt() {
      if (!token()) return;
      fetch(basePath + path, {
        method: "POST", credentials: "same-origin", keepalive: true,
        headers: { "X-CSRF-Token": token() },
        body: new URLSearchParams(fields),
      }).then(function (response) {
        if (response.status === 429) {
          var after = parseFloat(response.headers.get("Retry-After"));
          retry(after > 0 ? after * 1000 : 0);
        } else if (response.status >= 500) {
          retry(0);
        }
      }, function () { retry(0); });
    }
    attempt();
  }

  function lesson() { return document.querySelector(".lesson[data-episode]"); }

  // A drill's answer as it is sent to be checked (the server grades it again for the class).
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (!token() || !form.matches || !form.matches("form.drill")) return;
    var answer = new FormData(form).get("answer");
    if (answer === null || String(answer).trim() === "") return;
    send("/class/answer", { drill: form.id.replace(/^drill-/, ""), answer: String(answer),
                            answer_id: answerId() }, TRIES);
  });

  var sent = {};
  function moved(step, kind) {
    var node = lesson();
    if (!node || !step.id) return;
    var key = kind + ":" + step.id;
    if (kind === "open" && sent[key]) return;  // one "open" per step and page
    sent[key] = true;
    send("/class/progress", { episode: node.dataset.episode, step: step.id, kind: kind });
  }

  // A try link followed (lab.js holds one under a prediction until the guess: that click
  // never gets here, so a step is never reported tried before it is guessed).
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.try");
    var step = link && link.closest("section.step[id]");
    if (step && token()) moved(step, "try");
  });

  function watchSteps() {
    var node = lesson();
    if (!node || !("IntersectionObserver" in window)) return;
    var seen = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) { if (entry.isIntersecting) moved(entry.target, "open"); });
    }, { threshold: 0.5 });
    node.querySelectorAll("section.step[id]").forEach(function (step) { seen.observe(step); });
  }

  function showBar() {
    var main = document.querySelector("main");
    if (!main || document.querySelector(".class-page") || !window.htmx) return;
    var bar = document.createElement("aside");
    bar.className = "class-bar";
    bar.id = "class-bar";
    bar.setAttribute("aria-label", "Your class");
    bar.setAttribute("hx-get", basePath + "/class/me");
    bar.setAttribute("hx-trigger", "load, " + BAR_POLL);
    bar.setAttribute("hx-swap", "innerHTML");
    main.insertBefore(bar, main.firstChild);
    window.htmx.process(bar);
  }

  function start() {
    if (!token()) return;
    showBar();
    watchSteps();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
