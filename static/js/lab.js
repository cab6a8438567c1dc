// Parallelism Lab's one script. It draws every figure it finds in the page or in content htmx
// swaps in (a <script type="application/json" class="figure" data-target="ID">), updating the
// chart in place with Plotly.react; sends control changes at once (one request in flight, the
// last value queued by hx-sync); keeps dependent controls consistent; brings the diagram a
// step teaches into view; themes charts light or dark. Fragments carry figure data only.
(function () {
  "use strict";

  var root = document.documentElement;
  var phone = window.matchMedia("(max-width: 900px)");
  var coarse = window.matchMedia("(pointer: coarse)");
  var systemDark = window.matchMedia("(prefers-color-scheme: dark)");

  // No link to any other host (plotly's cloud buttons off); PNG download kept. The toolbar
  // shows on hover only, and not at all on touch screens, where it would sit on the data.
  function plotConfig() {
    return {
      responsive: true, displaylogo: false, showLink: false, showEditInChartStudio: false,
      showSendToCloud: false, scrollZoom: false, modeBarButtonsToRemove: ["lasso2d", "select2d"],
      displayModeBar: coarse.matches || phone.matches ? false : "hover",
      toImageButtonOptions: { format: "png", scale: 2 },
    };
  }

  // plotly.js (through d3) sets a few style attributes with setAttribute("style", ...): a
  // heatmap's pixelated rendering and its flip on a reversed axis, a colour bar's reset. A
  // Content-Security-Policy without 'unsafe-inline' refuses those (style-src-attr), and the
  // heatmap would draw blurred or upside down. The same declarations set through CSSOM are
  // allowed: route them there, so charts draw exactly as before.
  var setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (String(name).toLowerCase() === "style" && this.style) {
      this.style.cssText = String(value);
      return undefined;
    }
    return setAttribute.call(this, name, value);
  };

  function within(node, selector) {
    var found = Array.prototype.slice.call(node.querySelectorAll ? node.querySelectorAll(selector) : []);
    if (node.matches && node.matches(selector)) found.unshift(node);
    return found;
  }

  // ---- Theme: the figures are built for a light page; dark mode swaps their few fixed
  // colours (ink, grid, label backgrounds) before Plotly.react. ----
  var DARK = [["#1d2330", "#e3e7ef"], ["#e6e9ef", "#343b4a"],
              ["rgba(255,255,255,0.85)", "rgba(23,27,36,0.85)"], ["#5b6475", "#a9b1c2"]];

  function isDark() {
    var chosen = root.dataset.theme;
    return chosen ? chosen === "dark" : systemDark.matches;
  }

  function themed(text) {
    if (!isDark()) return text;
    DARK.forEach(function (pair) { text = text.split(pair[0]).join(pair[1]); });
    return text;
  }

  // ---- Drawing ----
  function fitHeight(layout, el) {
    // A chart never taller than the view it scrolls in, so a step's diagram fits on screen.
    var view = el.closest(".bench-view");
    if (!view) {
      // An embed's box follows its figure too (lab.css), so a figure taller than the usual
      // box (EP04's efficiency, 440 px for its legend) is not cut at 360.
      if (el.closest(".embed-diagram") && !layout.height) {
        layout.height = el.classList.contains("short") ? 280 : 360;
      }
      return;
    }
    // Figures without a height of their own take their box's usual one (lab.css: .chart 360,
    // .chart.short 280): in the bench the box follows the figure, so it must have one.
    if (!layout.height) layout.height = el.classList.contains("short") ? 280 : 360;
    var room = Math.min(view.clientHeight - 48, phone.matches ? 300 : Infinity);
    if (room > 200 && layout.height > room) layout.height = room;
  }

  function announce() {
    var status = document.getElementById("lab-status");
    if (!status) return;
    var lines = within(document, ".bench-view [data-summary]").map(function (c) { return c.dataset.summary; });
    var text = lines.join(" ");
    if (status.textContent !== text) status.textContent = text;  // said again only if new
  }

  function drawn(el, state, summary) {
    // A hook for tests and assistive tech: what the chart now shows. role="figure" (not
    // "img") because the chart holds the toolbar's buttons.
    el.dataset.drawn = state;
    el.setAttribute("role", "figure");
    if (summary) described(el, summary);
    el.dispatchEvent(new CustomEvent("lab:drawn", { bubbles: true, detail: { state: state } }));
  }

  function described(el, summary) {
    if (el.dataset.summary === summary) return;
    el.setAttribute("aria-label", summary);
    el.dataset.summary = summary;
  }

  function drawKey(script) {
    var veil = veilOf(document.getElementById(script.dataset.target), metaOf(script));
    return script.textContent + (isDark() ? "|dark" : "|light") + (phone.matches ? "|phone" : "") +
      (veil ? "|masked:" + (veil === "all" ? "all" : veil.map(function (g) { return g.step; }).join(" ")) : "");
  }

  // ---- A figure that answers a step's prediction (an .answer-mask element, a chart label with
  // a "masked" text) stays masked on a lesson page until that step is guessed or its why
  // opened: the number asked for is never on the screen before the guess (issue 36), even
  // where a control or a case button, which are the bench's and never held, draws the state. ----
  var unmasked = {};

  // The key is a chart's id (every step that names it as its diagram: the first guess lifts
  // it) or a step's own id (that step's guess alone: a figure one step of several on the same
  // diagram asks for).
  // A drill's form id ("drill-<id>") keys what its state answers (EP09's timeline at the
  // predict drill's or the decide's state): masked until the drill is answered (its form
  // swapped for one marked data-answered).
  // A prediction's beat id ("predict-<id>") keys what answers that prediction, on whichever
  // page holds it: masked until its step is guessed (EP01's bench, whose chart the
  // playground's panel also draws beside steps of its own, with the same step ids).
  function masking(key) {
    var k = key && CSS.escape(key);
    if (key && key.indexOf("predict-") === 0) {
      var beat = document.querySelector(".step .predict-beat#" + k);
      return !!beat && !unmasked[beat.closest(".step").id];
    }
    return !!key && !unmasked[key] && !!document.querySelector(
      '.step[data-diagram="' + k + '"] .predict-beat, .step#' + k + " .predict-beat, " +
      "form.drill#" + k + ":not([data-answered])");
  }

  // data-after-guess may name several keys (a figure several steps or drills ask about,
  // EP09's step time): masked while any of them is.
  function maskedBy(keys) {
    return (keys || "").split(" ").some(masking);
  }

  function maskAnswers(node) {
    // A step's limit waits for its guess, as its why does: shown before it, a limit can answer
    // the prediction above it (round-22 cold readings: "Interleaving shrinks the bubble; it
    // cannot remove it" under "about halves / stays the same / doubles"). The last beat comes
    // after the why; a step with no prediction shows its limit at once.
    // So do its notes outside the why ("Where this comes from"): open before the guess, EP02
    // step 6's printed the ring's 8.55 ms against the tree's 206 us (round-31 reading A).
    within(node, ".step .limit, .step details.sources").forEach(function (el) {
      var step = el.closest(".step");
      if (step && step.id && step.querySelector(".predict-beat") &&
          !(el.matches(".sources") && el.closest(".why"))) el.hidden = masking(step.id);
    });
    // An element whose presence answers a step (EP10's ledger rows that BF16 lacks: that FP8
    // keeps more than BF16's 16 bytes) is hidden, not masked, until its keys are guessed.
    within(node, "[data-hidden-until-guess]").forEach(function (el) {
      el.hidden = maskedBy(el.getAttribute("data-hidden-until-guess"));
    });
    // A case button whose whole state answers a step (EP05's 8 x 1) is held as that step's
    // try links are (holdMove), until its guess; its line says why once pressed.
    within(node, "a.case[data-held-until]").forEach(function (link) {
      var why = document.getElementById(link.id + "-why");
      if (maskedBy(link.getAttribute("data-held-until"))) {
        link.setAttribute("aria-disabled", "true");
        return;
      }
      link.removeAttribute("aria-disabled");
      if (why && why._labText != null) {
        why.textContent = why._labText;
        why._labText = null;
        why.classList.remove("held");
      }
    });
    within(node, ".answer-mask[data-after-guess]").forEach(function (el) {
      var mask = el.getAttribute("data-mask") || "?";
      if (maskedBy(el.getAttribute("data-after-guess"))) {
        if (el.textContent !== mask) { el._labAnswer = el.textContent; el.textContent = mask; }
        el.classList.add("masked");
      } else {
        if (el._labAnswer != null && el.textContent === mask) el.textContent = el._labAnswer;
        el.classList.remove("masked");
      }
    });
  }

  // A guess lifts its step's masks: the texts, and every drawn chart whose veil it changes
  // (its own diagram's, or the traces it owns on a chart several steps ask about).
  function unmask(step) {
    var chart = step && step.getAttribute("data-diagram");
    if (!step || (unmasked[step.id] && (!chart || unmasked[chart]))) return;
    if (step.id) unmasked[step.id] = true;
    if (chart) unmasked[chart] = true;
    remask();
  }

  // The masks as the answers now stand: the texts, and every drawn chart whose veil changed.
  function remask() {
    maskAnswers(document);
    within(document, ".js-plotly-plot").forEach(function (el) {
      if (el._labFigure && el._labDrawnKey && !el._labStale &&
          el._labDrawnKey !== drawKey(el._labFigure)) drawOne(el._labFigure);
    });
  }

  // ---- A masked chart (layout.meta.masked) on a lesson page before its step's guess is drawn
  // veiled: the labels' masked texts, and nothing else that reads as the answer, neither on
  // the screen nor in the plotted data (gd.data, gd.layout; issue 36: the bar heights and the
  // hover values gave the masked label's figure away). Each trace is drawn grey at one
  // neutral height; its positions stay on a category axis (ranks), and on a numeric one are
  // spaced evenly (a crossover chart's sweep ends where the answer puts it); every numeric
  // axis runs 0 to 1 without ticks; no hover, no customdata or text; no shapes (a mean line,
  // the crossover's dashed line and its shading sit at the answer); a masked label sits at a
  // neutral place. The real figure is drawn at the guess (unmask). The value axis is y (x for
  // a horizontal bar). ----
  var VEIL = "#b8bec9";
  var VEIL_KEEP = ["type", "name", "mode", "showlegend", "legendgroup", "xaxis", "yaxis",
                   "orientation", "opacity", "fill", "hoverongaps"];

  // A masked figure's layout.meta (read once per figure text; a figure without "masked" is
  // never parsed here).
  function metaOf(script) {
    var text = script.textContent;
    if (script._labMetaText !== text) {
      var meta = null;
      if (text.indexOf('"masked"') >= 0) {
        try { meta = (JSON.parse(text).layout || {}).meta || null; } catch (e) { meta = null; }
      }
      script._labMetaText = text;
      script._labMeta = meta;
    }
    return script._labMeta;
  }

  // What of a masked chart is veiled now: null (nothing), "all" (the whole chart), or the
  // owner groups still to be guessed. A chart several steps ask about (EP06's cost: step 6's
  // bytes, step 7's attention) names each step's traces, labels and summary in
  // layout.meta.owners ([{step, traces, annotations, shapes, summary: [text, its mask]}]):
  // it is veiled whole until the first of them is guessed, and after that only the parts
  // whose step is still to be guessed are hidden. A chart whose meta says "partly" (EP10's
  // ledger: only the FP8 copies answer step 1) is never veiled whole: only its owners' parts.
  // A chart without owners is one step's (or every step's that names it as its diagram): the
  // first guess lifts it whole. An owner's step may name several keys, as data-after-guess
  // does (EP06's crossover: step 8's chart, whose ratio at step 7's state answers step 7):
  // its part waits for all of them. A chart whose meta names keys to wait for (meta.after, as
  // an .answer-mask's data-after-guess: EP05's Gantt at a state that answers step 2 or a
  // drill) is veiled whole while any of them is masked, and else as its owners say (none:
  // drawn).
  function veilOf(el, meta) {
    if (!el || !meta || !meta.masked) return null;
    if (meta.after && maskedBy(meta.after)) return "all";
    var groups = meta.owners || [];
    if (!groups.length) return !meta.after && masking(el.id) ? "all" : null;
    var pending = groups.filter(function (g) { return maskedBy(g.step); });
    if (!pending.length) return null;
    return pending.length === groups.length && !meta.partly ? "all" : pending;
  }

  function axisKey(ref) {  // "x2" -> "xaxis2"
    return ref.charAt(0) + "axis" + ref.slice(1);
  }

  function veilTrace(t, layout, numeric) {
    var out = { hoverinfo: "skip" };
    VEIL_KEEP.forEach(function (k) { if (t[k] !== undefined) out[k] = t[k]; });
    var flat = function (v) { return v == null ? null : 0.5; };
    if (t.type === "heatmap") {  // cells by index, all one grey
      out.z = (t.z || []).map(function (row) { return row.map(flat); });
      out.showscale = false;
      out.colorscale = [[0, VEIL], [1, VEIL]];
      return out;
    }
    var across = t.type === "bar" && t.orientation === "h";
    var pos = across ? "y" : "x", value = across ? "x" : "y";
    var at = t[pos] || [], posKey = axisKey(t[pos + "axis"] || pos);
    var named = (layout[posKey] || {}).type === "category" ||
      (at.length > 0 && at.every(function (p) { return typeof p === "string"; }));
    out[pos] = named ? at : at.map(function (p, i) { return at.length > 1 ? i / (at.length - 1) : 0.5; });
    if (!named) numeric[posKey] = true;
    out[value] = (t[value] || []).map(flat);
    numeric[axisKey(t[value + "axis"] || value)] = true;
    if (t.line) out.line = { color: VEIL, dash: t.line.dash, width: t.line.width };
    if (t.marker) out.marker = { color: VEIL, symbol: t.marker.symbol, size: t.marker.size };
    if (t.fill) out.fillcolor = "rgba(184,190,201,0.25)";
    return out;
  }

  function veiled(fig) {
    var layout = fig.layout, masked = layout.meta.masked, numeric = {};
    // A trace's name while veiled (layout.meta.names), where the legend would give the answer
    // (EP10's speed chart: each recipe's step); null: left out of the legend.
    var names = layout.meta.names || {};
    var data = (fig.data || []).map(function (t, i) {
      var out = veilTrace(t, layout, numeric);
      if (names[i] === null) out.showlegend = false;
      else if (names[i] !== undefined) out.name = names[i];
      return out;
    });
    Object.keys(numeric).forEach(function (key) {
      var axis = Object.assign({}, layout[key]);
      ["range", "tickvals", "ticktext", "dtick", "tick0", "rangemode", "autorange"]
        .forEach(function (k) { delete axis[k]; });
      layout[key] = Object.assign(axis, { type: "linear", range: [-0.05, 1.05], showticklabels: false });
    });
    // Only the masked labels, each at the plot's middle on a numeric axis (a bar's label on
    // the bars' top, a crossover's in the middle); on a category axis a place is an index.
    layout.annotations = (layout.annotations || []).reduce(function (kept, a, i) {
      if (masked[i] === undefined) return kept;
      var note = Object.assign({}, a, { text: masked[i] });
      ["x", "y"].forEach(function (c) {
        var ref = note[c + "ref"] || c;
        if (/paper|domain/.test(ref) || !numeric[axisKey(ref)]) return;
        note[c] = 0.5;
        if (c === "x") note.xanchor = "center";
      });
      kept.push(note);
      return kept;
    }, []);
    layout.shapes = [];
    layout.hovermode = false;
    untitled(layout);
    return { data: data, layout: layout };
  }

  // A veiled chart's legend has no title: a title may print the state the veil hides (EP03's
  // memory chart: "ZeRO-2, D = 32: 989 GB state", step 2's answer).
  function untitled(layout) {
    if (layout.legend && layout.legend.title) {
      layout.legend = Object.assign({}, layout.legend);
      delete layout.legend.title;
    }
  }

  // A chart partly veiled (some owners guessed, some not): the real figure, less what the
  // steps still to be guessed own. Their traces keep their legend entry, grey, with no value
  // (one empty point: plotly drops a trace with none from the legend) and no hover; their
  // masked labels sit at the plot's middle with their masked text (one placed on the paper,
  // not at a value, keeps its place: EP06's crossover's state label above the plot), their
  // other labels and their shapes are dropped. Each axis keeps the type the real figure gives
  // it (keptTypes).
  function stepName(keys) {
    return keys.split(" ").map(function (k) { return k.replace(/^step-/, "step "); }).join(" and ");
  }

  // Plotly takes an axis's type, where the layout leaves it, from the first trace with data
  // on it; a veiled trace's one empty point ([null]) reads as linear, which would turn a
  // category axis of bar names (EP09's pools, EP10's recipes) numeric. So where that first
  // trace is veiled, the axis is given the type its real data has: category for names,
  // multicategory for pairs of them.
  function typeOf(values) {
    var set = values.filter(function (v) { return v != null; });
    if (set.length && set.every(Array.isArray)) return "multicategory";
    var named = set.length && set.every(function (v) {
      return typeof v === "string" && (v.trim() === "" || isNaN(Number(v)));
    });
    return named ? "category" : null;
  }

  function keptTypes(fig, layout, hidden) {
    var first = {};
    (fig.data || []).forEach(function (t, i) {
      ["x", "y"].forEach(function (c) {
        var key = axisKey(t[c + "axis"] || c);
        if (key in first || !(t[c] || []).length) return;
        first[key] = true;
        var type = hidden[i] === undefined || (layout[key] || {}).type ? null : typeOf(t[c]);
        if (type) layout[key] = Object.assign({}, layout[key], { type: type });
      });
    });
  }

  // A trace whose points an owner holds (layout.meta.owners[].points: [trace, point] pairs;
  // EP10's ledger: the FP8 bar's weights, gradients, master and moments, beside BF16's,
  // drawn): those points are drawn without their value, label or hover; the others as given.
  function withoutPoints(t, held) {
    var out = Object.assign({}, t);
    var value = t.type === "bar" && t.orientation === "h" ? "x" : "y";
    [value, "customdata", "text", "hovertext"].forEach(function (k) {
      if (!Array.isArray(t[k])) return;
      out[k] = t[k].map(function (v, j) { return held.indexOf(j) >= 0 ? null : v; });
    });
    return out;
  }

  function partlyVeiled(fig, pending) {
    var layout = fig.layout, masked = layout.meta.masked;
    var traces = {}, notes = {}, shapes = {}, points = {}, pointNames = {};
    pending.forEach(function (g) {
      (g.traces || []).forEach(function (i) { traces[i] = g.step; });
      (g.points || []).forEach(function (p) { (points[p[0]] = points[p[0]] || []).push(p[1]); });
      // A trace with points held may take a name saying so while they wait (EP02's IB curve).
      Object.keys(g.names || {}).forEach(function (i) { pointNames[i] = g.names[i]; });
      (g.annotations || []).forEach(function (i) { notes[i] = true; });
      (g.shapes || []).forEach(function (i) { shapes[i] = true; });
    });
    keptTypes(fig, layout, traces);
    var names = layout.meta.names || {};  // as veiled(): a name that would give the answer
    var data = (fig.data || []).map(function (t, i) {
      if (traces[i] === undefined) {
        if (!points[i]) return t;
        var kept = withoutPoints(t, points[i]);
        if (pointNames[i]) kept.name = pointNames[i];
        return kept;
      }
      var out = { hoverinfo: "skip", x: [null], y: [null] };
      VEIL_KEEP.forEach(function (k) { if (t[k] !== undefined && k !== "fill") out[k] = t[k]; });
      if (names[i] === null) out.showlegend = false;
      else if (names[i] !== undefined) out.name = names[i];
      else if (t.name) out.name = t.name + " (after " + stepName(traces[i]) + ")";
      if (t.line) out.line = { color: VEIL, dash: t.line.dash, width: t.line.width };
      if (t.marker) out.marker = { color: VEIL, symbol: t.marker.symbol, size: t.marker.size };
      return out;
    });
    layout.annotations = (layout.annotations || []).reduce(function (kept, a, i) {
      if (!notes[i]) kept.push(a);
      else if (masked[i] !== undefined && /paper/.test(a.xref) && /paper/.test(a.yref)) {
        kept.push(Object.assign({}, a, { text: masked[i] }));  // a place, no value: kept
      } else if (masked[i] !== undefined) {
        kept.push(Object.assign({}, a, { text: masked[i], xref: "paper", yref: "paper", x: 0.5,
                                         y: 0.5, xanchor: "center", yanchor: "middle",
                                         xshift: 0, yshift: 0 }));
      }
      return kept;
    }, []);
    layout.shapes = (layout.shapes || []).filter(function (s, i) { return !shapes[i]; });
    // An axis whose reach the hidden parts set (EP05's memory chart: its GB axis ran to the
    // worst rank's total, which the hidden activations make; EP01's bill, whose top is the
    // whole bill) takes the one the figure gives for the parts drawn (layout.meta.axes).
    var axes = layout.meta.axes || {};
    Object.keys(axes).forEach(function (key) { layout[key] = axes[key]; });
    untitled(layout);
    return { data: data, layout: layout };
  }

  // The meta plotly keeps of a veiled chart (gd.layout.meta, which devtools show): each owner
  // still to be guessed carries its summary's mask alone. The real text stays in the figure's
  // script, and the redraw at the guess puts it back (round-9 cold reading of EP09, item 7).
  function veiledMeta(meta, veil) {
    var pending = (veil === "all" ? meta.owners || [] : veil).map(function (g) { return g.step; });
    return Object.assign({}, meta, { owners: (meta.owners || []).map(function (g) {
      return g.summary && pending.indexOf(g.step) >= 0 ? Object.assign({}, g, { summary: [g.summary[1]] }) : g;
    }) });
  }

  // What a chart says it shows (aria-label, the status line): while veiled, that its figures
  // wait for the guess (its bench caption's mask where it has one), never the answer.
  // A chart with owners says what it can: each owner's figure still to be guessed is its mask
  // (meta.owners[].summary: [the text, its mask]).
  function summaryOf(el, fig) {
    var meta = fig.layout && fig.layout.meta, veil = veilOf(el, meta);
    if (!veil) return fig.summary;
    var caption = document.querySelector('.chart-summary[data-chart="' + CSS.escape(el.id) + '"][data-mask]');
    if (veil === "all" && caption) return caption.getAttribute("data-mask");
    var pending = veil === "all" ? meta.owners || [] : veil;
    if (!pending.length) return "This chart's figures show once its step is guessed.";
    return pending.reduce(function (text, g) {
      return g.summary ? text.split(g.summary[0]).join(g.summary[1]) : text;
    }, fig.summary || "");
  }

  // Whether the steps still to guess own every trace: such a chart is veiled whole, for drawn
  // partly its axes keep the ranges its figures set (EP03's overlap chart at the bad case,
  // step 5 still to guess: its ms axis, to 20k, gave ZeRO-3's 17 s away).
  function ownsAll(fig, pending) {
    var owned = {};
    pending.forEach(function (g) { (g.traces || []).forEach(function (i) { owned[i] = true; }); });
    return (fig.data || []).every(function (t, i) { return owned[i]; });
  }

  function drawOne(script, force) {
    var el = document.getElementById(script.dataset.target);
    if (!el || !window.Plotly) return;
    el._labFigure = script;
    watch(el);
    // The state this draw stands for, read now: a newer answer may rewrite the script (its
    // text and data-state) before Plotly.react resolves.
    var state = script.dataset.state || "";
    var key = drawKey(script);
    if (el._labStale) {
      el._labStale = false;
      delete el.dataset.stale;
    }
    // Only the latest draw of a chart says what it shows: an older Plotly.react that resolves
    // after a newer answer's draw (a slow machine, two answers close together) must not mark
    // the chart with its older state.
    var token = el._labToken = (el._labToken || 0) + 1;
    var done = function (summary) { if (el._labToken === token) drawn(el, state, summary); };
    // The same figure as drawn, or being drawn (a control that moves another chart of the
    // lab, the same theme and size): nothing to redraw, only the state it stands for, once
    // that draw has resolved.
    if (!force && el._labDrawnKey === key && el._fullLayout) {
      var after = function () { done(el.dataset.summary); };
      return Promise.resolve(el._labDrawing).then(after, after);
    }
    // A veil lifted (or changed) is drawn afresh: Plotly.react does not bring back the labels
    // of a text trace the veil drew without its text (EP03's traffic chart: its bytes over
    // the bars stayed away after step 4's guess).
    var unveiling = /\|masked:/.test(el._labDrawnKey || "") && el._labDrawnKey !== key;
    el._labDrawnKey = key;
    var fig = JSON.parse(themed(script.textContent));
    // A chart whose cell labels take a smaller size on a phone (layout.meta.phoneText: EP09's
    // cluster map, eight GPUs across about 300 px), read before a veil replaces its meta.
    var phoneText = phone.matches && fig.layout && fig.layout.meta && fig.layout.meta.phoneText;
    if (phoneText) (fig.data || []).forEach(function (t) {
      if (t.textfont) t.textfont = Object.assign({}, t.textfont, { size: phoneText });
    });
    var veil = veilOf(el, fig.layout && fig.layout.meta);
    if (veil && veil !== "all" && ownsAll(fig, veil)) veil = "all";
    var summary = summaryOf(el, fig);
    if (veil === "all") Object.assign(fig, veiled(fig));
    else if (veil) Object.assign(fig, partlyVeiled(fig, veil));
    if (veil) fig.layout.meta = veiledMeta(fig.layout.meta, veil);
    var layout = fig.layout || {};
    if (isDark()) {
      // Plotly's own defaults (#444 text and ticks) are unreadable on a dark page.
      layout.font = Object.assign({}, layout.font, { color: "#e3e7ef" });
      Object.keys(layout).forEach(function (key) {
        if (/^[xy]axis\d*$/.test(key)) layout[key] = Object.assign({ color: "#c9d0dc" }, layout[key]);
      });
    }
    fitHeight(layout, el);
    if (coarse.matches) layout.dragmode = false;  // a swipe scrolls the page, never zooms
    if (unveiling && el._fullLayout) window.Plotly.purge(el);
    if (!el._fullLayout && el.firstChild) el.textContent = "";  // markup from a page, not a live plot
    var config = Object.assign(plotConfig(), fig.config || {});
    var drawing = el._labDrawing = window.Plotly.react(el, fig.data, layout, config).then(function () {
      // data-veiled: drawn veiled, until the guess (tests wait for the real figure on it):
      // empty while veiled whole, else the steps whose parts are still hidden.
      if (el._labToken === token) {
        if (!veil) el.removeAttribute("data-veiled");
        else el.setAttribute("data-veiled", veil === "all" ? ""
          : veil.map(function (g) { return g.step; }).join(" "));
      }
      done(summary);
    });
    return drawing;
  }

  // ---- Charts out of sight wait: after a control's answer, a chart whose figure changed
  // is redrawn now only where the student can see it (or nearly: 200 px beyond the view and
  // the bench's own scroll), and the chart the control moves; the others are marked stale
  // (data-stale: the state they will show) and drawn when they scroll into view. Their
  // summary (aria-label) is the new state's at once. ----
  var NEAR = "200px 0px";
  var sight = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    var due = [];
    entries.forEach(function (entry) {
      var el = entry.target;
      el._labSeen = entry.isIntersecting;
      if (entry.isIntersecting && el._labStale && el._labFigure) due.push(el._labFigure);
    });
    if (due.length) drawQueue(due);
  }, { rootMargin: NEAR, scrollMargin: NEAR }) : null;

  function watch(el) {
    if (sight && !el._labWatched) { el._labWatched = true; sight.observe(el); }
  }

  function markStale(el, script) {
    el._labFigure = script;
    el._labStale = true;
    el.dataset.stale = script.dataset.state || "";
    var summary = null;
    try { summary = summaryOf(el, JSON.parse(script.textContent)); } catch (e) { /* drawn later */ }
    if (summary) described(el, summary);
  }

  function onScreen(script) {
    var el = document.getElementById(script.dataset.target);
    if (!el) return false;
    var box = el.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight && box.height > 0;
  }

  // One chart per task, those on screen first: the chart the student is watching is drawn
  // (and painted) before the next one starts, rather than after every chart of the answer.
  // A chart whose figure a newer answer has replaced meanwhile is skipped (that answer's own
  // pass draws it), so an older pass never draws over a newer state. Which figure is a
  // chart's own is what the last answer holding one said (draw() sets _labFigure), not whether
  // its script is still in the page: an answer with no figure at all (EP08's broken plan:
  // "the chart keeps the last plan that could run") removes the scripts, and a chart still due
  // (queued, or stale out of sight) must then draw that last plan, not keep the one before.
  var nextTask = (function () {
    var channel = new MessageChannel(), queued = [];
    channel.port1.onmessage = function () { queued.shift()(); };
    return function (fn) { queued.push(fn); channel.port2.postMessage(0); };
  })();

  function isFigureOf(script) {
    var el = document.getElementById(script.dataset.target);
    return !!el && el._labFigure === script;
  }

  function drawQueue(queue) {
    (function next(i) {
      while (i < queue.length && !isFigureOf(queue[i])) i++;
      if (i >= queue.length) { announce(); return; }
      var go = function () { nextTask(function () { next(i + 1); }); };
      var drawing;
      // A chart that fails to draw must not stop the charts after it.
      try { drawing = drawOne(queue[i]); } catch (e) { drawing = Promise.reject(e); }
      Promise.resolve(drawing).then(go, go);
    })(0);
  }

  // lazy (a control's answer, its section updated in place): which charts are in sight is
  // the observer's last word, so nothing is measured; a chart it has not reported on yet is
  // drawn. Otherwise (a page, a bench swapped whole) every chart, those on screen first.
  function draw(node, lazy) {
    var scripts = within(node, "script.figure[data-target]");
    if (!scripts.length) return;
    scripts.forEach(function (script) {
      var el = document.getElementById(script.dataset.target);
      if (el) el._labFigure = script;  // this answer's figure: older passes skip theirs
    });
    if (!lazy) {
      var now = scripts.filter(onScreen);
      drawQueue(now.concat(scripts.filter(function (s) { return now.indexOf(s) < 0; })));
      return;
    }
    var moved = (keeping && keeping.id) || (afterDrag && afterDrag.id), queue = [];
    scripts.forEach(function (script) {
      var el = document.getElementById(script.dataset.target);
      if (!el) return;
      var same = el._labDrawnKey === drawKey(script) && el._fullLayout;
      if (same || el._labSeen !== false || el.id === moved) {
        if (el.id === moved) queue.unshift(script); else queue.push(script);
      } else {
        markStale(el, script);
      }
    });
    drawQueue(queue);
  }

  function redrawAll() {
    within(document, ".js-plotly-plot").forEach(function (el) { if (el._labFigure) drawOne(el._labFigure, true); });
  }

  // ---- Controls ----
  function controlValue(form, name) {
    var checked = form.querySelector('[name="' + name + '"]:checked');
    if (checked) return checked.value;
    var el = form.querySelector('[name="' + name + '"]');
    return el ? el.value : "";
  }

  function syncDependents(form) {
    // <select data-filter-by="mode">: only options whose data-when (space-separated values)
    // holds the mode are offered; a link select filtered by "gpu" offers the fabrics it ships on.
    within(form, "select[data-filter-by]").forEach(function (select) {
      var want = controlValue(form, select.dataset.filterBy);
      var firstOk = null;
      Array.prototype.forEach.call(select.options, function (opt) {
        var ok = !opt.dataset.when || opt.dataset.when.split(" ").indexOf(want) >= 0;
        opt.disabled = !ok;
        opt.hidden = !ok;
        if (ok && firstOk === null) firstOk = opt;
      });
      // A group (EP01's "taught in EP10" recipes) shows only while it offers an option.
      Array.prototype.forEach.call(select.querySelectorAll("optgroup"), function (group) {
        group.hidden = !Array.prototype.some.call(group.children, function (opt) {
          return !opt.hidden;
        });
      });
      var current = select.options[select.selectedIndex];
      if (current && current.disabled && firstOk) select.value = firstOk.value;
    });
    // data-enabled-when="control=value" (or "control=a|b|c"): disabled (so not submitted)
    // otherwise, with the reason (.disabled-reason) shown by CSS through .is-disabled.
    within(form, "[data-enabled-when]").forEach(function (box) {
      var rule = box.dataset.enabledWhen.split("=");
      var off = rule[1].split("|").indexOf(controlValue(form, rule[0])) < 0;
      if ("disabled" in box && box.tagName !== "LABEL") box.disabled = off;
      else within(box, "input, select").forEach(function (input) { input.disabled = off; });
      box.classList.toggle("is-disabled", off);
    });
    within(form, "output[for]").forEach(function (out) {
      var src = document.getElementById(out.htmlFor);
      if (src) out.value = src.value;
    });
    within(form, "input[type=range][data-unit]").forEach(function (input) {
      input.setAttribute("aria-valuetext", input.value + " " + input.dataset.unit);
    });
  }

  // A slider or select sends at once; typing waits for a pause (a half-typed "7e" is no
  // state). Sliders and typing replace the URL; choices push a history entry.
  // During a drag: the first move is sent at once; moves while that request is out are
  // folded into one, sent when it is answered, so the last value is always drawn and there is
  // never more than one request in flight.
  var typing = null;
  function send(form, history) {
    if (!window.htmx) return;
    if (form._labBusy) { form._labPending = form._labPending === "push" ? "push" : history; return; }
    form._labBusy = true;
    window.htmx.trigger(form, "labsend", { history: history });
  }

  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    if (!form || !form.classList || !form.classList.contains("controls")) return;
    form._labBusy = false;
    var next = form._labPending;
    form._labPending = null;
    if (next) send(form, next);
  });

  // A slider dragged by a pointer: its chart is brought into view on release.
  var dragging = false, afterDrag = null;
  document.addEventListener("pointerdown", function (event) {
    if (event.target.closest && event.target.closest("#drawer input[type=range]")) dragging = true;
  }, true);
  function dropped() {
    dragging = false;
    var chart = afterDrag;
    afterDrag = null;
    if (chart && shown(chart) < 0.95) keepInView(chart);
  }
  document.addEventListener("pointerup", dropped, true);
  document.addEventListener("pointercancel", dropped, true);

  // data-fills-rest="a b / c d" on a number control: when a, b, c or d moves, it becomes
  // a·b ÷ (c·d) where that is whole, as Megatron sets DP to what divides the rest of the
  // launched GPUs (EP08: nodes × GPUs per node ÷ (TP·PP·CP)); otherwise it stays, and the
  // server names the broken rule.
  function fillRest(form, input) {
    within(form, "input[data-fills-rest]").forEach(function (target) {
      if (target === input) return;
      var parts = target.dataset.fillsRest.split("/");
      var top = parts[0].trim().split(/\s+/), bottom = parts[1].trim().split(/\s+/);
      if (top.concat(bottom).indexOf(input.name) < 0) return;
      var product = function (names) {
        return names.reduce(function (acc, name) { return acc * Number(controlValue(form, name)); }, 1);
      };
      var value = product(top) / product(bottom);
      if (Number.isInteger(value) && value >= 1 && String(value) !== target.value) {
        target.value = String(value);
      }
    });
  }

  document.addEventListener("input", function (event) {
    var input = event.target;
    var form = input.form;
    if (!form || !form.classList.contains("controls")) return;
    fillRest(form, input);
    syncDependents(form);
    if (!form.hasAttribute("hx-trigger")) return;
    var moved = movedBy(input);
    if (moved) {
      form._labMoved = moved.id;
      // Brought into view at once, unless a pointer is dragging the control (the page would
      // move under it): then when its answer is drawn, and at the latest on release.
      if (!dragging && shown(moved) < 0.95) keepInView(moved, true);
    }
    clearTimeout(typing);
    if (input.type === "text" || input.type === "number") {
      typing = setTimeout(function () { send(form, "replace"); }, 350);
    } else {
      send(form, input.type === "range" ? "replace" : "push");
    }
  }, true);

  // A form with many optional controls (EP12's playground) leaves the empty ones out of the
  // request, so its pushed URL holds only what was set (an empty value means "not given").
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (!form || !form.hasAttribute || !form.hasAttribute("data-drop-empty")) return;
    var params = event.detail.parameters;
    var keys = params instanceof FormData ? Array.from(params.keys()) : Object.keys(params);
    keys.forEach(function (key) {
      var value = params instanceof FormData ? params.get(key) : params[key];
      if (value === "") { if (params instanceof FormData) params.delete(key); else delete params[key]; }
    });
  });

  // The form's URL rule for this response, from the event that sent its request.
  document.addEventListener("htmx:beforeOnLoad", function (event) {
    var cfg = event.detail.requestConfig;
    var form = cfg && cfg.elt;
    if (!form || !form.classList || !form.classList.contains("controls")) return;
    if (form.hasAttribute("data-embed")) return;  // an embed's form never touches history (embed.js)
    var trig = cfg.triggeringEvent;
    var replace = trig && trig.detail && trig.detail.history === "replace";
    // (htmx reads a present hx-push-url, even "false", before hx-replace-url: remove it.)
    form.removeAttribute(replace ? "hx-push-url" : "hx-replace-url");
    form.setAttribute(replace ? "hx-replace-url" : "hx-push-url", "true");
  });

  // ---- The chart being worked stays in view: after a case button, a slider move or opening
  // the controls, the bench sits at its pinned place (laptop: the whole bench; phone: the
  // diagram pane at the top edge) and its view scrolls just enough to show the chart whole
  // above the controls. ----
  var DIAGRAMS = "#bench-view .chart, #bench-view figure.tp-split";

  function roomBottom() {
    // The lowest line of the screen not under the controls (a phone's open drawer).
    var drawer = document.getElementById("drawer");
    if (phone.matches && drawer && drawer.classList.contains("open")) return drawer.getBoundingClientRect().top;
    return window.innerHeight;
  }

  function pinBench() {
    var pinned = document.getElementById(phone.matches ? "bench-view" : "bench");
    if (!pinned || window.getComputedStyle(pinned).position !== "sticky") return;
    var top = pinned.getBoundingClientRect().top - parseFloat(window.getComputedStyle(pinned).top || 0);
    if (top > 1) window.scrollBy(0, top);
  }

  // Laptop: the bench sticks under the top edge at the screen's height, and its sticky box
  // cannot pass the end of the lesson. Scrolled to the page's end (the footer in view), the
  // lesson ends above the screen's bottom and the bench was pushed up by as much: its cases
  // and its diagram's headline cut off at the top edge (EP02, 103 px at 1280×800). Instead it
  // gets that much shorter (lab.css --bench-cut), its top kept, its view scrolling the rest.
  // Measured off the steps' column, whose height never depends on the bench's; a lesson
  // whose steps are shorter than the bench (its height then the lesson's) is left alone.
  function fitBench() {
    var bench = document.getElementById("bench");
    var lesson = bench && bench.parentElement;
    var steps = lesson && lesson.classList.contains("lesson") && lesson.querySelector(":scope > .steps");
    if (!steps) return;
    var cut = 0;
    if (!phone.matches && window.getComputedStyle(bench).position === "sticky") {
      var gap = parseFloat(window.getComputedStyle(bench).top) || 0;
      var end = steps.getBoundingClientRect().bottom;
      var full = window.innerHeight - 2 * gap;
      if (end - lesson.getBoundingClientRect().top > full) {
        cut = Math.min(Math.max(0, Math.ceil(window.innerHeight - gap - end)), full / 2);
      }
    }
    var value = cut ? cut + "px" : "";
    if (bench.style.getPropertyValue("--bench-cut") !== value) bench.style.setProperty("--bench-cut", value);
  }
  // Scroll fires many times a frame: the layout is read once a frame, in the frame's
  // callback before paint (round-18 code review: fitBench read it on every scroll event).
  var fitQueued = false;
  function fitSoon() {
    if (fitQueued) return;
    fitQueued = true;
    window.requestAnimationFrame(function () { fitQueued = false; fitBench(); });
  }
  window.addEventListener("scroll", fitSoon, { passive: true });
  window.addEventListener("resize", fitSoon);
  document.addEventListener("htmx:afterSwap", fitBench);

  function shown(el) {
    // The share of el's height between the view's top and the room's bottom.
    var view = el.closest(".bench-view");
    var box = el.getBoundingClientRect();
    if (!view || box.height <= 0) return 0;
    var v = view.getBoundingClientRect();
    var top = Math.max(v.top, 0), bottom = Math.min(v.bottom, roomBottom());
    return Math.max(0, Math.min(box.bottom, bottom) - Math.max(box.top, top)) / box.height;
  }

  function watched() {
    // The diagram the student is looking at: the most shown one, else the first.
    var best = null, most = 0;
    within(document, DIAGRAMS).forEach(function (el) {
      var share = shown(el);
      if (share > most + 0.01) { best = el; most = share; }
    });
    return best || document.querySelector(DIAGRAMS);
  }

  // A chart resized by its redraw (Plotly.react resolves after the swap) is shown again then.
  var keeping = null;
  // ifHidden: only if less than 95% of it is shown (a control's answer).
  // revealed: a try link's diagram, which a chart above it can push down as that one is drawn
  // at its new height (EP07's rank map, before the network chart): any chart's draw shows it
  // again if it is no longer in view.
  function keepDrawn(el) {
    var k = keeping;
    if (!k || performance.now() - k.at >= 5000) return;
    if (k.revealed) {
      var kept = document.getElementById(k.id);
      if (kept && shown(kept) < 0.95) { reveal(kept); keeping = k; }
      return;
    }
    if (el.id !== k.id) return;
    if (k.ifHidden && shown(el) >= 0.95) { keeping = null; return; }
    keepInView(el);
  }
  document.addEventListener("lab:drawn", function (event) { keepDrawn(event.target); });
  // The student's own scroll ends a try link's hold: a chart drawn as it comes into sight
  // must not pull the view back.
  ["wheel", "touchstart", "keydown"].forEach(function (type) {
    window.addEventListener(type, function () {
      if (keeping && keeping.revealed) keeping = null;
    }, { passive: true, capture: true });
  });

  // follow: shown again once its redraw resolves (a case button's, a control's answer).
  function keepInView(chart, follow) {
    if (!chart || !chart.isConnected) return;
    keeping = follow ? { id: chart.id, at: performance.now() } : null;
    pinBench();
    var view = chart.closest(".bench-view");
    if (!view) return;
    var v = view.getBoundingClientRect();
    var top = Math.max(v.top, 0), bottom = Math.min(v.bottom, roomBottom());
    var box = chart.getBoundingClientRect();
    if (box.top >= top && box.bottom <= bottom) return;
    // With its title when both fit, by the least scroll; else the chart's top at the top.
    var head = chart.previousElementSibling && chart.previousElementSibling.matches(".chart-title")
      ? chart.previousElementSibling.getBoundingClientRect().top : box.top;
    var delta;
    if (box.bottom - head + 8 <= bottom - top) {
      delta = head < top ? head - top - 4 : Math.min(box.bottom - bottom + 4, head - top - 4);
    } else {
      delta = box.top - top - 4;
    }
    view.scrollTop += delta;
  }

  // The chart a control moves: the first drawn one its group names (data-diagrams on the
  // group's title), else the one in view.
  // A group inside "more controls" has its own title there: looked for first, nearest out.
  function movedBy(input) {
    var form = input.form;
    for (var level = input; level && level !== form; level = level.parentElement) {
      for (var item = level.previousElementSibling; item; item = item.previousElementSibling) {
        if (item.matches && item.matches(".group-title[data-diagrams]")) {
          var ids = item.dataset.diagrams.split(/\s+/);
          for (var i = 0; i < ids.length; i++) {
            var el = document.getElementById(ids[i]);
            if (el && el.getBoundingClientRect().height > 0) return el;
          }
          return watched();
        }
      }
    }
    return watched();
  }

  // ---- Bench swaps: a try link brings its step's diagram into view; a case button keeps the
  // chart in view that the student was looking at (or brings its own data-diagram into
  // view), and keeps focus. ----
  var pending = null;

  // The diagram the last try link brought into view (a chart, or EP11's checkpoint readout,
  // which watched() does not weigh): opening a phone's controls keeps it in view while it is.
  var stepDiagram = null;

  // Scroll a bench view on past a line its top edge cuts (a readout's figure, the verdict
  // above the chart), where the chart stays whole in view.
  function wholeLines(view, chart) {
    var top = view.getBoundingClientRect().top;
    var lines = within(view, ".verdict, dl.readout dt, dl.readout dd");
    for (var pass = 0; pass < 3; pass++) {  // a taller neighbour may be cut in its turn
      var cut = 0;
      lines.forEach(function (el) {
        var box = el.getBoundingClientRect();
        if (box.top < top - 0.5 && box.bottom > top + 0.5) cut = Math.max(cut, box.bottom - top);
      });
      if (!cut || chart.getBoundingClientRect().top - cut < top) return;
      view.scrollTop += Math.ceil(cut);
    }
  }

  function reveal(chart) {
    keeping = null;  // a step's diagram now, not the one a control moved before
    stepDiagram = chart.id;
    // Laptop: the whole bench (diagram view and controls) on screen; it then sticks there.
    var bench = document.getElementById("bench");
    if (bench && window.getComputedStyle(bench).display !== "contents") bench.scrollIntoView({ block: "nearest" });
    var view = chart.closest(".bench-view");
    // The chart's title above it: a lazy diagram's (EP08 step 14's) sits above its holder, so
    // a phone's pinned view scrolled to the chart alone cut the title's lines off its top.
    var holder = chart.closest(".lazy-diagram") || chart;
    var anchor = holder.previousElementSibling && holder.previousElementSibling.matches(".chart-title")
      ? holder.previousElementSibling : chart;
    // A panel's key figures just above the title (EP12's readout tiles, the figure a step
    // asks: step 5's forward wait) show with it, where the tiles, the title and the chart fit
    // the view together (round 18: step 5's tile was scrolled out above the title).
    var tiles = anchor !== chart && anchor.previousElementSibling;
    if (view && tiles && tiles.matches("dl.readout")
        && chart.getBoundingClientRect().bottom - tiles.getBoundingClientRect().top <= view.clientHeight - 8) {
      anchor = tiles;
    }
    if (view && view.scrollHeight > view.clientHeight) {
      var top = anchor.getBoundingClientRect().top - view.getBoundingClientRect().top + view.scrollTop;
      view.scrollTop = Math.max(0, top - 8);
    }
    var box = chart.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) chart.scrollIntoView({ block: "nearest" });
    // The controls that move this chart, at the top of the controls' own scroll.
    var group = document.querySelector('#drawer [data-diagrams~="' + chart.id + '"]');
    var pane = group && [document.querySelector("#drawer .drawer-body"), document.getElementById("drawer")]
      .filter(function (el) { return el && el.scrollHeight > el.clientHeight + 1; })[0];
    if (pane) pane.scrollTop += group.getBoundingClientRect().top - pane.getBoundingClientRect().top - 4;
    keeping = { id: chart.id, at: performance.now(), revealed: true };
  }

  // A page opened at a try link's URL (the address a followed link pushed, shared or
  // reloaded) opens as the followed link left it: at the link's step, its diagram in view. The
  // link is the first in page order whose href is this address (EP08 step 13's first link
  // opened its page at step 1 on the step bar, the layer view below the fold:
  // tests/browser/test_opened_link_in_view.py).
  function openedLink() {
    if (!window.location.search) return null;
    var here = window.location.pathname + window.location.search;
    var links = within(document, "section.step a.try[href]");
    for (var i = 0; i < links.length; i++) {
      var url = new URL(links[i].getAttribute("href"), window.location.href);
      if (url.pathname + url.search !== here) continue;
      var step = links[i].closest("section.step[data-diagram]");
      var id = links[i].dataset.diagram || (step && step.dataset.diagram);
      var chart = id && document.getElementById(id);
      if (chart && chart.getBoundingClientRect().height > 0) return { step: step, chart: chart };
    }
    return null;
  }

  function showOpened() {
    var opened = openedLink();
    if (!opened) return;
    // The step at the top (below a phone's pinned diagram: lab.css scroll-margin-top), the
    // bench fitted and pinned there, then its view scrolled to the diagram.
    opened.step.scrollIntoView({ block: "start" });
    fitBench();
    pinBench();
    reveal(opened.chart);
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || target.id !== "bench") return;
    var elt = event.detail.requestConfig && event.detail.requestConfig.elt;
    var view = document.getElementById("bench-view");
    var step = elt && elt.closest ? elt.closest("section.step[data-diagram]") : null;
    var isCase = elt && elt.matches && elt.matches(".case");
    var seen = isCase || !(elt && elt.dataset) ? watched() : null;
    pending = {
      diagram: elt && elt.dataset && (elt.dataset.diagram || (step && step.dataset.diagram)),
      watched: seen ? seen.id : null,
      scrollTop: view ? view.scrollTop : 0,
      caseId: isCase ? elt.id : null,
      drawer: document.querySelector(".drawer.open") !== null,
    };
  });

  // A control's answer must leave in view a chart it changed: when the chart its group names
  // (or the one in view) kept its figure while others changed, the first of those, in page
  // order (EP12's shared controls move charts far from the one in view). Figures compared
  // by their JSON, read just before the answer is swapped in and just after.
  function figureTexts() {
    var found = {};
    within(document, "script.figure[data-target]").forEach(function (s) { found[s.dataset.target] = s.textContent; });
    return found;
  }

  function changedBy(before) {
    var charts = [];
    within(document, "script.figure[data-target]").forEach(function (s) {
      var el = document.getElementById(s.dataset.target);
      if (el && before[s.dataset.target] !== s.textContent && el.getBoundingClientRect().height > 0) charts.push(el);
    });
    return charts;
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var form = event.detail.requestConfig && event.detail.requestConfig.elt;
    if (form && form._labMoved) form._labFigures = figureTexts();
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var form = event.detail.requestConfig && event.detail.requestConfig.elt;
    if (form && form._labMoved) {  // a control's answer: its chart kept in view
      var moved = document.getElementById(form._labMoved);
      var changed = form._labFigures ? changedBy(form._labFigures) : [];
      form._labMoved = form._labFigures = null;
      if (changed.length && changed.indexOf(moved) < 0) moved = changed[0];
      if (moved && dragging) afterDrag = moved;  // not while the page would move under it
      // Measured once it is drawn, not now: a measure here would lay the swapped section
      // out once more before the chart is drawn (and again after).
      else if (moved && !(keeping && keeping.id === moved.id && !keeping.ifHidden)) {
        keeping = { id: moved.id, at: performance.now(), ifHidden: true };
      }
    }
    if (event.detail.target && event.detail.target._labUpdated) init(event.detail.target);
    if (form && form.matches && form.matches("form.drill")) remask();  // a drill answered
    if (!pending) return;
    var p = pending;
    pending = null;
    var view = document.getElementById("bench-view");
    if (p.drawer) openDrawer(true);
    // A try link's step diagram; a case button's own (data-diagram: the chart it changes,
    // where the one in view would not change); else the chart the student was watching.
    var chart = p.diagram && document.getElementById(p.diagram);
    if (chart) reveal(chart);
    else {
      // A case swaps the whole bench: it starts from the bench's top, then scrolls no further
      // than the chart kept in view needs, and no line of the bench is left cut in half at
      // the top (round-19 cold reading X, finding 16: the old scroll kept the readout's first
      // line half under the case buttons).
      if (view) view.scrollTop = p.caseId ? 0 : p.scrollTop;
      var kept = p.watched && document.getElementById(p.watched);
      if (kept) keepInView(kept, true);
      if (kept && view && p.caseId) wholeLines(view, kept);
    }
    if (p.caseId) {
      var again = document.getElementById(p.caseId);
      if (again) again.focus({ preventScroll: true });
    }
  });

  // ---- A control's answer updates its section in place: each element the answer keeps
  // (same tag and id, in the same place) is kept, its attributes and text set to the
  // answer's; what differs in shape is replaced. A live chart (hx-preserve) is never
  // touched: its figure script is updated and draw() redraws it only if the figure changed.
  // So an answer costs the browser only what changed (style, layout, paint), not the whole
  // section. The result is the answer's markup exactly, as an outerHTML swap would leave
  // it, but for the styles paint() sets and the live charts. ----
  var UPDATE = "lab-update";

  function sameShape(a, b) {
    if (a.length !== b.length) return false;
    for (var i = 0; i < a.length; i++) {
      var x = a[i], y = b[i];
      if (x.nodeType !== y.nodeType) return false;
      if (x.nodeType === 1 && (x.tagName !== y.tagName || x.id !== y.id)) return false;
    }
    return true;
  }

  // Whether an htmx attribute changed (a lazy diagram's hx-get at the new state): the caller
  // has htmx process the element again, which re-arms its trigger for the new URL.
  function setAttributes(el, next) {
    var i, attr, restyle = false, rearm = false;
    for (i = el.attributes.length - 1; i >= 0; i--) {
      attr = el.attributes[i];
      // style: set by paint() through CSSOM (the answer never carries one).
      if (attr.name !== "style" && !next.hasAttribute(attr.name)) {
        el.removeAttribute(attr.name);
        restyle = restyle || PAINTED.test(attr.name);
        rearm = rearm || HTMX_ATTR.test(attr.name);
      }
    }
    for (i = 0; i < next.attributes.length; i++) {
      attr = next.attributes[i];
      if (el.getAttribute(attr.name) !== attr.value) {
        el.setAttribute(attr.name, attr.value);
        restyle = restyle || PAINTED.test(attr.name);
        rearm = rearm || HTMX_ATTR.test(attr.name);
      }
    }
    if (restyle) unpaint(el);  // paint() sets what the new values say
    return rearm;
  }
  var HTMX_ATTR = /^hx-/;

  function replaceChildren(el, next) {
    // The live charts inside move into the new markup, in their placeholders' places.
    within(el, "[hx-preserve]").forEach(function (chart) {
      var spot = chart.id && next.querySelector("#" + CSS.escape(chart.id));
      if (spot) spot.replaceWith(chart);
    });
    var nodes = Array.prototype.slice.call(next.childNodes);
    el.replaceChildren.apply(el, nodes);
    nodes.forEach(function (node) { if (node.nodeType === 1) window.htmx.process(node); });
  }

  function update(el, next) {
    var rearm = setAttributes(el, next);
    var kids = el.childNodes, nextKids = next.childNodes;
    if (!sameShape(kids, nextKids)) replaceChildren(el, next);
    else {
      for (var i = 0; i < kids.length; i++) {
        var kid = kids[i], nextKid = nextKids[i];
        if (kid.nodeType !== 1) {
          if (kid.nodeValue !== nextKid.nodeValue) kid.nodeValue = nextKid.nodeValue;
        } else if (!kid.hasAttribute("hx-preserve")) {
          update(kid, nextKid);
        }
      }
    }
    if (rearm) window.htmx.process(el);
  }

  // A lazy diagram that answers a lesson step's prediction (``lazy`` with after_guess: its
  // data-after-guess is the chart's id, the step's data-diagram) is fetched only once that step
  // is guessed, its why opened or one of its links followed (a link under its prediction is
  // followed only after one of those: holdMove); until then its place says so.
  var guessedCharts = {};

  function answersStep(place) {
    var chart = place.getAttribute("data-after-guess");
    return chart && document.querySelector('.step[data-diagram="' + CSS.escape(chart) + '"]') ? chart : null;
  }

  function releaseAnswer(step) {
    var chart = step && step.getAttribute("data-diagram");
    if (!chart || guessedCharts[chart]) return;
    guessedCharts[chart] = true;
    within(document, '.lazy-diagram.awaiting-guess[data-after-guess="' + CSS.escape(chart) + '"]')
      .forEach(function (place) {
        place.classList.remove("awaiting-guess");
        window.htmx.trigger(place, "lab-reveal");
      });
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var place = event.detail.elt;
    if (!place || !place.classList || !place.classList.contains("lazy-diagram")) return;
    var chart = answersStep(place);
    if (chart && !guessedCharts[chart]) {
      event.preventDefault();
      place.classList.add("awaiting-guess");
    }
  });

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest(".step a.try");
    if (link) releaseAnswer(link.closest(".step"));
  }, true);

  // A lazy diagram (templates/partials/_figure.html ``lazy``) answered for a state its place no
  // longer shows (a control moved while it was fetched) is dropped: the place's own fetch,
  // re-armed by update(), brings the state shown.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var d = event.detail, target = d.target;
    if (!target || !target.classList || !target.classList.contains("lazy-diagram")) return;
    if (d.requestConfig && d.requestConfig.path !== target.getAttribute("hx-get")) d.shouldSwap = false;
  });

  function defineUpdate() {
    window.htmx.defineExtension(UPDATE, {
      handleSwap: function (style, target, fragment, settleInfo) {
        if (style !== UPDATE) return false;
        var nodes = Array.prototype.slice.call(fragment.childNodes);
        var elements = nodes.filter(function (n) { return n.nodeType === 1; });
        var next = elements[0];
        if (elements.length === 1 && next.tagName === target.tagName && next.id === target.id &&
            nodes.every(function (n) { return n === next || !n.textContent.trim(); })) {
          update(target, next);
          // No htmx:load for it (htmx would walk the whole section again for hx- attributes
          // it never has): lab.js's afterSwap handler inits it, drawing only what is in sight.
          target._labUpdated = true;
          return [];
        }
        // Not the section answered for (never expected): replaced whole, as outerHTML.
        target.replaceWith.apply(target, nodes);
        settleInfo.elts = elements;
        return elements;
      },
    });
    root.setAttribute("hx-ext", UPDATE);
  }

  // Which answers are updated in place: a lesson's control answers (200, swapping the
  // section they answer for). A case button or step link swaps the bench whole; an embed's
  // form swaps the embed's body; an errors-only answer swaps nothing (HX-Reswap: none).
  document.addEventListener("htmx:beforeSwap", function (event) {
    var d = event.detail, form = d.requestConfig && d.requestConfig.elt;
    if (!form || !form.classList || !form.classList.contains("controls") || form.hasAttribute("data-embed")) return;
    if (!d.shouldSwap || d.swapOverride || d.xhr.status !== 200 || !d.target || d.target.id === "bench") return;
    if (form.getAttribute("hx-swap") !== "outerHTML" || typeof d.serverResponse !== "string") return;
    // The charts are kept by update() itself: htmx's own hx-preserve would take every live
    // chart out of the page and put it back, laying each out afresh.
    d.serverResponse = d.serverResponse.split(' hx-preserve="true"').join("").replace(EMPTY_SLOT, unchanged);
    d.swapOverride = UPDATE;
  });

  // An answer clears every error slot of its form out of band (templates/partials/
  // _errors_oob.html; EP12: 93 of them): one already empty is left out of the answer before
  // htmx reads it, rather than swapped for the same (htmx swaps each on its own, with events).
  var EMPTY_SLOT = /<small class="field-error" id="(error-[^"]+)" hx-swap-oob="true" role="alert"><\/small>\s*/g;
  function unchanged(slot, id) {
    var live = document.getElementById(id);
    var same = live && live.tagName === "SMALL" && live.className === "field-error" && !live.firstChild &&
      live.getAttribute("role") === "alert" && live.attributes.length === 3;
    return same ? "" : slot;
  }

  // An error slot the answer leaves as it is (empty before, empty now) is not swapped: a
  // lesson clears every slot on every answer (EP12: 93), each an out-of-band swap.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var d = event.detail, next = d.fragment && d.fragment.firstElementChild;
    if (d.target && next && d.target.matches(".field-error, .form-error") && d.target.isEqualNode(next)) {
      d.shouldSwap = false;
    }
  });

  // ---- Phone drawer, theme toggle, copy buttons ----
  function openDrawer(open) {
    var drawer = document.getElementById("drawer");
    if (!drawer) return;
    drawer.classList.toggle("open", open);
    var toggle = drawer.querySelector(".drawer-toggle");
    if (toggle) toggle.setAttribute("aria-expanded", open ? "true" : "false");
  }

  function showTheme() {
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    button.hidden = false;
    button.setAttribute("aria-pressed", isDark() ? "true" : "false");
  }

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest(".drawer-toggle");
    if (toggle) {
      var opening = toggle.getAttribute("aria-expanded") !== "true";
      var step = stepDiagram && document.getElementById(stepDiagram);
      var chart = opening ? (step && shown(step) >= 0.95 ? step : watched()) : null;
      openDrawer(opening);
      if (chart) keepInView(chart);  // the diagram above the open controls, never under them
      return;
    }
    if (event.target.closest("#theme-toggle")) {
      var next = isDark() ? "light" : "dark";
      root.dataset.theme = next;
      try { localStorage.setItem("lab-theme", next); } catch (e) { /* private mode: not kept */ }
      showTheme();
      redrawAll();
      return;
    }
    var button = event.target.closest("[data-copy-target]");
    if (!button) return;
    var source = document.getElementById(button.dataset.copyTarget);
    source.select();
    var done = function () { button.textContent = "Copied"; };
    if (navigator.clipboard) navigator.clipboard.writeText(source.value).then(done, done);
    else { document.execCommand("copy"); done(); }
  });

  systemDark.addEventListener("change", function () { if (!root.dataset.theme) { showTheme(); redrawAll(); } });

  // Colours and sizes a template computes (legend swatches, EP04's matrix boxes) ride in
  // data attributes and are set here through CSSOM: the Content-Security-Policy refuses style
  // attributes in markup (style-src 'self', app/security.py), not styles set from a script.
  var COLOUR = /^(#[0-9a-f]{3,8}|rgba?\([\d\s.,%]+\)|hsla?\([\d\s.,%deg]+\))$/i;
  // Each element painted once: a section updated in place keeps its styles, and one whose
  // data attributes change is unpainted (setAttributes) and painted again.
  var PAINTED = /^data-(colour|width-px|height-px|flex)$/;
  function unpaint(el) {
    el.removeAttribute("style");
    el._labPainted = false;
  }

  function paint(node) {
    var fresh = function (el) { return !el._labPainted; };
    within(node, "[data-colour]").filter(fresh).forEach(function (el) {
      if (COLOUR.test(el.dataset.colour)) el.style.background = el.dataset.colour;
    });
    within(node, "[data-width-px]").filter(fresh).forEach(function (el) {
      el.style.width = Number(el.dataset.widthPx) + "px";
      el.style.height = Number(el.dataset.heightPx) + "px";
    });
    within(node, "[data-flex]").filter(fresh).forEach(function (el) { el.style.flex = String(Number(el.dataset.flex)); });
    within(node, "[data-colour], [data-width-px], [data-flex]").forEach(function (el) { el._labPainted = true; });
  }

  // ---- In-step predictions (templates/partials/_predict.html): the student commits a guess,
  // which is said back (with right or not, where the step names its right choice), and the
  // step's why opens. Opening the why's summary is "show me" without a guess. ----
  function armPredictions(node) {
    within(node, "form.predict-form .predict-commit").forEach(function (button) {
      button.disabled = false;
      button.hidden = false;
    });
    // The step's try links are held (below), dimmed, with a word, until the guess or "show
    // me". They stay links with their href: focusable, and followed as ever without JS.
    within(node, ".predict-beat > .moves").forEach(function (moves) {
      moves.classList.add("before-guess");
      var note = document.createElement("span");
      note.className = "guess-first";
      note.id = "guess-first-" + moves.parentElement.id;
      note.setAttribute("aria-live", "polite");
      note.textContent = GUESS_FIRST;
      moves.insertBefore(note, moves.firstChild);
      within(moves, "a.try").forEach(function (link) {
        link.setAttribute("aria-disabled", "true");
        link.setAttribute("aria-describedby", note.id);
      });
    });
  }

  function guessed(beat) {
    var step = beat && beat.closest(".step");
    releaseAnswer(step);
    unmask(step);
    // Marked once its answers are drawn: the toggle event that opens a why runs after the
    // click, so a test (tests/browser/helpers.py show_me) waits for this, not the click.
    if (step) step.setAttribute("data-guessed", "");
    var moves = beat && beat.querySelector(":scope > .moves");
    if (!moves) return;
    moves.classList.remove("before-guess");
    within(moves, "a.try").forEach(function (link) {
      link.removeAttribute("aria-disabled");
      link.removeAttribute("aria-describedby");
    });
    var note = moves.querySelector(".guess-first");
    if (note) note.remove();
  }

  // A step's try link draws the step's answer on the bench (issue 36, round-6 cold readings:
  // EP07 step 4's 11.79 ms, EP01 step 4's 85.9 GB KV bar), so before the guess or "show me" a
  // click on it (a tap, Enter, a middle or modified click) is not followed: stopped here, in
  // the capture phase on the window, it never reaches htmx, the progress tick or the live
  // class (classroom.js sends a try only when it is followed). The note says why, aloud
  // (aria-live), and focus goes to the step's guess.
  var GUESS_FIRST = "Guess first, or open the why. ";
  var HELD = "That link shows this step's answer: commit a guess above, or open the why, first.";

  function holdMove(event) {
    var held = event.target.closest && event.target.closest("a.case[data-held-until][aria-disabled=true]");
    if (held) {
      event.preventDefault();
      event.stopImmediatePropagation();
      var why = document.getElementById(held.id + "-why");
      if (why && why._labText == null) {
        why._labText = why.textContent;
        why.textContent = held.getAttribute("data-held-note");
        why.classList.add("held");
      }
      return;
    }
    var link = event.target.closest && event.target.closest(".predict-beat > .moves.before-guess a.try");
    if (!link) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    var beat = link.closest(".predict-beat");
    var note = beat.querySelector(":scope > .moves > .guess-first");
    if (note && note.textContent !== HELD) { note.textContent = HELD; note.classList.add("held"); }
    var guess = beat.querySelector("form.predict-form input[name=guess]:checked") ||
      beat.querySelector("form.predict-form input[name=guess]");
    if (!guess) return;
    // Focused without the browser's own scroll, which would leave it under a phone's pinned
    // diagram: its form is scrolled to, stopping below that (lab.css scroll-margin-top).
    guess.focus({ preventScroll: true });
    guess.form.scrollIntoView({ block: "nearest" });
  }
  window.addEventListener("click", holdMove, true);
  window.addEventListener("auxclick", holdMove, true);

  // A why opened on a phone starts below the pinned diagram, as lab.css's scroll-margin-top
  // places it: opening it drops its step's guess-first note (guessed), a line above it, which
  // slid its summary up under the diagram (EP03, EP10 at 390x844: 24 px under it).
  function clearOfBench(why) {
    var view = document.getElementById("bench-view");
    if (!phone.matches || !view || window.getComputedStyle(view).position !== "sticky") return;
    var summary = why.querySelector(":scope > summary") || why;
    if (summary.getBoundingClientRect().top < view.getBoundingClientRect().bottom) {
      why.scrollIntoView({ block: "start" });
    }
  }

  document.addEventListener("toggle", function (event) {
    var why = event.target;
    if (!why.matches || !why.open) return;
    if (why.matches(".predict-beat > details.why")) guessed(why.parentElement);
    if (why.matches(".steps details.why")) clearOfBench(why);
  }, true);

  // A number guess said back beside the lab's figure (data-answer, "149 GB", "1.22 TB",
  // "9.3×"), and how far off it was: peer instruction works on that gap (round-5 reading).
  var SCALE = {kB: 1e-6, MB: 1e-3, GB: 1, TB: 1e3, PB: 1e6, "µs": 1e-3, ms: 1, s: 1e3};
  function compared(guess, form) {
    var answer = form.dataset.answer || "";
    var found = answer.match(/^\s*([\d,]*\.?\d+)\s*(\S*)/);
    var value = parseFloat(String(guess).replace(/,/g, ""));
    if (!found || !isFinite(value)) return ".";
    var lab = parseFloat(found[1].replace(/,/g, ""));
    var unit = ((form.querySelector(".unit") || {}).textContent || "").trim();
    if (SCALE[found[2]] && SCALE[unit]) lab = lab * SCALE[found[2]] / SCALE[unit];
    if (!(lab > 0)) return ".";
    var off = Math.round((value / lab - 1) * 100);
    var gap = off === 0 ? "spot on" : "you were " + Math.abs(off) + "% " + (off < 0 ? "low" : "high");
    return "; the lab: " + answer + " (" + gap + ").";
  }

  document.addEventListener("submit", function (event) {
    var form = event.target.closest && event.target.closest("form.predict-form");
    if (!form) return;
    event.preventDefault();
    var field = form.elements.guess;
    var chosen = form.querySelector("input[name=guess]:checked");
    var guess = chosen ? chosen.value : (field && field.value ? String(field.value).trim() : "");
    var said = form.querySelector(".predict-said");
    if (!guess) {
      said.textContent = chosen === null && form.querySelector("input[type=radio]") ? "Pick one first, or open the why below." : "Type a guess first, or open the why below.";
      said.hidden = false;
      return;
    }
    var text = chosen ? chosen.closest("label").textContent.trim() : guess + " " + ((form.querySelector(".unit") || {}).textContent || "");
    var right = form.dataset.right;
    within(form, ".predict-choice").forEach(function (label) {
      var input = label.querySelector("input");
      label.classList.toggle("right", !!right && input.value === right);
      label.classList.toggle("wrong", !!right && input.checked && input.value !== right);
    });
    said.textContent = "Your guess: " + text.trim() + (chosen ? "." : compared(guess, form)) +
      (right && chosen ? (chosen.value === right ? " Right." : " Not this one: the right one is marked.") : "") +
      " Now follow the link and read the why.";
    said.hidden = false;
    var why = form.parentElement.querySelector("details.why");
    if (why) why.open = true;
    guessed(form.parentElement);
  });

  function init(node) {
    var lazy = node._labUpdated === true;
    node._labUpdated = false;
    paint(node);
    maskAnswers(node);
    within(node, "form.controls").forEach(syncDependents);
    draw(node, lazy);
    // An HTML diagram (EP04's split) takes its size from paint(): shown again now.
    var kept = keeping && document.getElementById(keeping.id);
    if (kept && !kept.classList.contains("chart") && node.contains && node.contains(kept)) keepDrawn(kept);
  }

  document.addEventListener("DOMContentLoaded", function () {
    root.classList.add("js");
    showTheme();
    init(document);
    armPredictions(document);
    showOpened();
    fitBench();  // a page opened (or reloaded) scrolled to its end
    if (window.htmx) defineUpdate();
    if (window.htmx) window.htmx.onLoad(function (elt) { if (elt !== document.body) { init(elt); showTheme(); } });
  });
})();
