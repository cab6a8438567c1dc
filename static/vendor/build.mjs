// Builds the plotly.js bundle the app serves (/static/vendor/plotly.min.js): plotly.js's core
// and only the trace types the labs draw, from the pinned npm package (package-lock.json),
// with esbuild, as plotly.js documents partial bundles (its CUSTOM_BUNDLE.md; lib/index-*.js
// register lib/<trace> modules on lib/core the same way). Run by `make assets` and the
// Dockerfile after `npm ci`:
//
//     node static/vendor/build.mjs            (writes node_modules/.lab/plotly.min.js)
//
// plotly-bundle.json lists the trace types and the components (layout features) it holds;
// tests/app/test_plotly_bundle.py checks that every figure the labs produce uses only those,
// and tests/browser/test_csp_browser.py that the bundle registers exactly those traces. The
// attribute descriptions (plotly's schema documentation, read by nothing at run time but
// Plotly.PlotSchema.get()) are left out, as plotly.js's own builds once did
// (tasks/util/compress_attributes.js): 139 kB of the minified bundle.
import { readFileSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const { traces, components } = JSON.parse(readFileSync(join(here, "plotly-bundle.json"), "utf8"));
const plotly = JSON.parse(readFileSync(join(here, "node_modules/plotly.js/package.json"), "utf8"));
const out = join(here, "node_modules/.lab/plotly.min.js");

for (const name of [...traces, ...components]) {
  if (!/^[a-z0-9]+$/.test(name)) throw new Error(`plotly-bundle.json: not a module name: ${name}`);
}
// plotly.js's core (src/core.js, what lib/core exports) with only the components these
// figures use (plotly-bundle.json): the same plot API, scatter, locales and stylesheet, less
// the components that no figure names and that only add weight: layout images, updatemenus,
// sliders, range sliders and selectors, 3D annotations, subplot grids, error bars (a figure
// that names one fails tests/app/test_plotly_bundle.py). The box/lasso selection code stays
// in: the drag box imports it.
const fromSrc = (path) => `require('plotly.js/src/${path}')`;
const entry = `'use strict';
exports.version = ${fromSrc("version")}.version;
require('plotly.js/build/plotcss');
var Registry = ${fromSrc("registry")};
var register = exports.register = Registry.register;
var plotApi = ${fromSrc("plot_api")};
Object.keys(plotApi).forEach(function (name) {
  if (name.charAt(0) !== '_') exports[name] = plotApi[name];
  register({ moduleType: 'apiMethod', name: name, fn: plotApi[name] });
});
register(require('plotly.js/lib/scatter'));
register([${components.map((c) => fromSrc(`components/${c}`)).join(", ")}]);
register([${fromSrc("locale-en")}, ${fromSrc("locale-en-us")}]);
register([${traces.filter((t) => t !== "scatter").map((t) => `require('plotly.js/lib/${t}')`).join(", ")}]);
exports.Icons = ${fromSrc("fonts/ploticon")};
exports.PlotSchema = ${fromSrc("plot_api/plot_schema")};
`;

// ---- description: <string literals> -> description: '' in plotly.js's sources ----
// A literal is a quoted string or a name, or an array of them joined ('[...].join(" ")'), or
// several such joined by '+'. Anything else (a call, a template) is left as written.
function skipSpace(src, i) {
  for (;;) {
    if (/\s/.test(src[i] || "")) i++;
    else if (src.startsWith("//", i)) i = src.indexOf("\n", i) < 0 ? src.length : src.indexOf("\n", i);
    else if (src.startsWith("/*", i)) i = src.indexOf("*/", i) + 2;
    else return i;
  }
}

function readString(src, i) {
  const quote = src[i];
  if (quote !== "'" && quote !== '"') return -1;
  for (let j = i + 1; j < src.length; j++) {
    if (src[j] === "\\") j++;
    else if (src[j] === "\n") return -1;
    else if (src[j] === quote) return j + 1;
  }
  return -1;
}

// A string, or a name (`opts.description`): reading a name has no side effects.
function readValue(src, i) {
  const name = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*/.exec(src.slice(i, i + 200));
  if (name && !/^(function|new|typeof|void|delete|await|yield)$/.test(name[0])) {
    const after = skipSpace(src, i + name[0].length);
    return src[after] === "(" ? -1 : i + name[0].length;  // a call: left alone
  }
  return readString(src, i);
}

function readTerm(src, i) {
  if (src[i] !== "[") return readValue(src, i);
  i = skipSpace(src, i + 1);
  while (src[i] !== "]") {
    i = readValue(src, i);
    if (i < 0) return -1;
    i = skipSpace(src, i);
    if (src[i] === ",") i = skipSpace(src, i + 1);
    else if (src[i] !== "]") return -1;
  }
  i = skipSpace(src, i + 1);
  if (!src.startsWith(".join(", i)) return -1;
  i = readString(src, skipSpace(src, i + 6));
  if (i < 0) return -1;
  i = skipSpace(src, i);
  return src[i] === ")" ? i + 1 : -1;
}

function readLiteral(src, i) {
  let end = readTerm(src, i);
  if (end < 0) return -1;
  for (;;) {
    const next = skipSpace(src, end);
    if (src[next] !== "+") return next;
    end = readTerm(src, skipSpace(src, next + 1));
    if (end < 0) return -1;
  }
}

let stripped = 0;
function stripDescriptions(src) {
  const key = /\bdescription\s*:\s*/g;
  let result = "";
  let last = 0;
  for (let m; (m = key.exec(src)); ) {
    const start = m.index + m[0].length;
    const end = readLiteral(src, start);
    if (end < 0 || (src[end] !== "," && src[end] !== "}")) continue;
    result += src.slice(last, start) + "''";
    stripped += end - start;
    last = end;
    key.lastIndex = end;
  }
  return result + src.slice(last);
}

const withoutDescriptions = {
  name: "plotly-without-descriptions",
  setup(build) {
    build.onLoad({ filter: /[\\/]plotly\.js[\\/]src[\\/].*\.js$/ }, (args) => ({
      contents: stripDescriptions(readFileSync(args.path, "utf8")),
      loader: "js",
    }));
  },
};

const result = await esbuild.build({
  stdin: { contents: entry, resolveDir: here, sourcefile: "plotly-lab-entry.js" },
  bundle: true,
  minify: true,
  format: "iife",
  globalName: "Plotly",
  target: "es2016",
  // As plotly.js's own esbuild-config.js: d3 and others read `global`; no AMD.
  define: { global: "window", "define.amd": "false", "process.env.NODE_DEBUG": "false" },
  // registry.js requires maplibre-gl's stylesheet for map traces only: none here.
  loader: { ".css": "empty" },
  plugins: [withoutDescriptions],
  banner: {
    js: `/*! plotly.js v${plotly.version} (MIT, Plotly, Inc.), partial bundle: ` +
      `${traces.join(", ")}. Built by static/vendor/build.mjs. */`,
  },
  legalComments: "none",
  write: false,
  logLevel: "warning",
});

const code = result.outputFiles[0].contents;
// Its brotli form beside it, at the best quality: app/assets.py serves it (a second's work
// here, not at each start of the app).
const packed = brotliCompressSync(code, {
  params: {
    [constants.BROTLI_PARAM_QUALITY]: 11,
    [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
    [constants.BROTLI_PARAM_SIZE_HINT]: code.length,
  },
});
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, code);
writeFileSync(`${out}.br`, packed);
const br = packed.length;
const gz = gzipSync(code, { level: 9 }).length;
console.log(`${out}: plotly.js ${plotly.version} with ${traces.join(", ")}: ` +
  `${(code.length / 1e3).toFixed(0)} kB (gzip ${(gz / 1e3).toFixed(0)} kB, brotli ` +
  `${(br / 1e3).toFixed(0)} kB); ${(stripped / 1e3).toFixed(0)} kB of descriptions left out`);
