"""The charts of the report and the dashboard, drawn by the page's own script as SVG: no library, nothing
fetched (`STYLE` goes into the page's <style>, `SCRIPT` into its <script> before the code that calls it). Each
function marks its box with `data-marks`, the marks it drew (0: an empty chart saying why), which the browser
tests read."""

STYLE = """body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fafafa; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 0 0 8px; }
.muted { color: #666; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 16px; margin: 16px 0; }
figure { margin: 0; padding: 12px; background: #fff; border: 1px solid #ddd; border-radius: 6px; }
figcaption { font-size: 12px; color: #666; margin-top: 4px; }
svg { display: block; width: 100%; height: auto; }
svg text { font-size: 11px; fill: #444; }
.axis { stroke: #999; stroke-width: 1; } .grid-line { stroke: #eee; }
.line { fill: none; stroke: #2b6cb0; stroke-width: 2; } .limit { stroke: #c53030; stroke-dasharray: 6 4; stroke-width: 2; }
.bar { fill: #2b6cb0; } .bar.error { fill: #c53030; } .bar.run { fill: #2f855a; }
table { border-collapse: collapse; background: #fff; } td, th { border: 1px solid #ddd; padding: 4px 8px; text-align: left; }
.empty { fill: #999; font-style: italic; }
.bar.s0 { fill: #2b6cb0; } .bar.s1 { fill: #2f855a; } .bar.s2 { fill: #c53030; } .bar.s3 { fill: #b7791f; } .bar.s4 { fill: #6b46c1; }
.line.s1 { stroke: #2f855a; } .line.s2 { stroke: #c53030; } .line.s3 { stroke: #b7791f; } .line.s4 { stroke: #6b46c1; }"""  # noqa: E501 - the charts' CSS, one rule a line

SCRIPT = """const NS = "http://www.w3.org/2000/svg";
function el(name, attrs, parent, text) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function svgIn(id, w, h) {
  const box = document.getElementById(id);
  return el("svg", {viewBox: "0 0 " + w + " " + h, role: "img"}, box);
}
function fmt(v) { return v >= 1000 ? (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "k" : String(+v.toFixed(2)); }
function empty(svg, w, h, why) {
  el("text", {x: w / 2, y: h / 2, "text-anchor": "middle", class: "empty"}, svg, why);
  svg.parentNode.dataset.marks = "0";
}
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}
function yAxis(svg, L, T, W, H, max) {
  for (let i = 0; i <= 4; i++) {
    const y = T + H - H * i / 4;
    el("line", {x1: L, x2: L + W, y1: y, y2: y, class: "grid-line"}, svg);
    el("text", {x: L - 6, y: y + 4, "text-anchor": "end"}, svg, fmt(max * i / 4));
  }
  el("line", {x1: L, x2: L, y1: T, y2: T + H, class: "axis"}, svg);
  el("line", {x1: L, x2: L + W, y1: T + H, y2: T + H, class: "axis"}, svg);
}
// every how many bars a label is written: at most about 24 fit under a chart
function labelEvery(n) { return Math.max(1, Math.ceil(n / 24)); }
// a line chart over x = seconds (`xfmt`: another label of x); `limit`: a dashed horizontal line
function lineChart(id, xs, ys, limit, unit, xfmt) {
  const w = 560, h = 260, L = 52, T = 12, W = w - L - 16, H = h - T - 36, svg = svgIn(id, w, h);
  if (!xs.length || !ys.some(v => v > 0)) return empty(svg, w, h, "no data for this run");
  const xmax = xs[xs.length - 1] || 1, ymax = niceMax(Math.max(...ys, limit || 0) * 1.05);
  yAxis(svg, L, T, W, H, ymax);
  for (let i = 0; i <= 4; i++)
    el("text", {x: L + W * i / 4, y: T + H + 16, "text-anchor": "middle"}, svg, xfmt ? xfmt(xmax * i / 4) : fmt(xmax * i / 4) + " s");
  el("text", {x: L + W, y: T + H + 32, "text-anchor": "end"}, svg, unit);
  const pts = xs.map((x, i) => (L + W * x / xmax).toFixed(1) + "," + (T + H - H * ys[i] / ymax).toFixed(1));
  el("polyline", {points: (L + "," + (T + H)) + " " + pts.join(" "), class: "line"}, svg);
  if (limit) {
    const y = T + H - H * limit / ymax;
    el("line", {x1: L, x2: L + W, y1: y, y2: y, class: "limit"}, svg);
    el("text", {x: L + W - 4, y: y - 4, "text-anchor": "end"}, svg, "limit " + limit + "/s");
  }
  svg.parentNode.dataset.marks = String(ys.length);
}
// vertical bars: one per label
function barChart(id, labels, values, cls) {
  const w = 560, h = 260, L = 52, T = 12, W = w - L - 16, H = h - T - 52, svg = svgIn(id, w, h);
  if (!values.some(v => v > 0)) return empty(svg, w, h, "nothing to show");
  const ymax = niceMax(Math.max(...values)), step = W / values.length, bw = Math.max(2, step * 0.7);
  yAxis(svg, L, T, W, H, ymax);
  values.forEach((v, i) => {
    const bh = H * v / ymax, x = L + step * i + (step - bw) / 2;
    const r = el("rect", {x: x.toFixed(1), y: (T + H - bh).toFixed(1), width: bw.toFixed(1), height: bh.toFixed(1),
                          class: "bar " + (cls || "")}, svg);
    el("title", {}, r, labels[i] + ": " + v);
    if (i % labelEvery(labels.length) === 0)
      el("text", {x: (x + bw / 2).toFixed(1), y: T + H + 14, "text-anchor": "end",
                  transform: "rotate(-30 " + (x + bw / 2).toFixed(1) + " " + (T + H + 14) + ")"}, svg, labels[i]);
  });
  svg.parentNode.dataset.marks = String(values.filter(v => v > 0).length);
}
// horizontal bars, for long labels
function hbarChart(id, labels, values) {
  const row = 20, w = 560, L = 250, T = 6, W = w - L - 50, h = T + row * labels.length + 8, svg = svgIn(id, w, Math.max(h, 60));
  if (!values.length) return empty(svg, w, 60, "no template stored yet");
  const max = Math.max(...values);
  values.forEach((v, i) => {
    const y = T + row * i, bw = W * v / max;
    el("text", {x: L - 6, y: y + 14, "text-anchor": "end"}, svg, labels[i].length > 40 ? "…" + labels[i].slice(-39) : labels[i]);
    const r = el("rect", {x: L, y: y + 3, width: bw.toFixed(1), height: row - 6, class: "bar"}, svg);
    el("title", {}, r, labels[i] + ": " + v);
    el("text", {x: L + bw + 4, y: y + 14}, svg, String(v));
  });
  svg.parentNode.dataset.marks = String(values.length);
}
// bars in groups: one group per label, one bar per series ({name: values}), with a legend
function groupChart(id, labels, series) {
  const names = Object.keys(series), w = 560, h = 260, L = 52, T = 22, W = w - L - 16, H = h - T - 52, svg = svgIn(id, w, h);
  const all = names.flatMap(n => series[n]);
  if (!all.some(v => v > 0)) return empty(svg, w, h, "nothing to show");
  const ymax = niceMax(Math.max(...all)), step = W / labels.length, bw = Math.max(1, step * 0.8 / names.length);
  yAxis(svg, L, T, W, H, ymax);
  names.forEach((n, k) => {
    el("rect", {x: L + 110 * k, y: 4, width: 10, height: 10, class: "bar s" + k}, svg);
    el("text", {x: L + 110 * k + 14, y: 13}, svg, n);
  });
  let marks = 0;
  labels.forEach((label, i) => {
    names.forEach((n, k) => {
      const v = series[n][i] || 0, bh = H * v / ymax, x = L + step * i + step * 0.1 + bw * k;
      const r = el("rect", {x: x.toFixed(1), y: (T + H - bh).toFixed(1), width: bw.toFixed(1), height: bh.toFixed(1), class: "bar s" + k}, svg);
      el("title", {}, r, label + ", " + n + ": " + v);
      if (v > 0) marks++;
    });
    if (i % labelEvery(labels.length) === 0)
      el("text", {x: (L + step * i + step / 2).toFixed(1), y: T + H + 14, "text-anchor": "end",
                  transform: "rotate(-30 " + (L + step * i + step / 2).toFixed(1) + " " + (T + H + 14) + ")"}, svg, label);
  });
  svg.parentNode.dataset.marks = String(marks);
}
// several lines over the same labels (x: their index), one per series ({name: values}), with a legend
function linesChart(id, labels, series) {
  const names = Object.keys(series), w = 560, h = 260, L = 52, T = 22, W = w - L - 16, H = h - T - 36, svg = svgIn(id, w, h);
  const all = names.flatMap(n => series[n].filter(v => v !== null));
  if (!labels.length || !all.some(v => v > 0)) return empty(svg, w, h, "nothing to show");
  const ymax = niceMax(Math.max(...all) * 1.05), xmax = Math.max(1, labels.length - 1);
  yAxis(svg, L, T, W, H, ymax);
  for (const i of [0, Math.floor(xmax / 2), xmax])
    if (labels[i] !== undefined)
      el("text", {x: L + W * i / xmax, y: T + H + 16, "text-anchor": i === 0 ? "start" : i === xmax ? "end" : "middle"}, svg, labels[i]);
  names.forEach((n, k) => {
    el("rect", {x: L + 110 * k, y: 4, width: 10, height: 10, class: "bar s" + k}, svg);
    el("text", {x: L + 110 * k + 14, y: 13}, svg, n);
    const pts = series[n].map((v, i) => v === null ? null : (L + W * i / xmax).toFixed(1) + "," + (T + H - H * v / ymax).toFixed(1)).filter(p => p);
    el("polyline", {points: pts.length === 1 ? pts[0] + " " + pts[0] : pts.join(" "), class: "line s" + k}, svg);
  });
  svg.parentNode.dataset.marks = String(all.length);
}"""  # noqa: E501 - the script, one statement a line
