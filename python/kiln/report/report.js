
(function () {
"use strict";
var D = JSON.parse(document.getElementById("kiln-data").textContent);
var P = D.profile;
var MS = D.measured || null;  // a kiln-profile/1 file folded in (kiln visualize --profile), else null

function esc(s) {
  return String(s).replace(/[&<>"']/g, function (c) {
    return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
  });
}
function fmt(n, d) {
  if (n === null || n === undefined || isNaN(n)) return "–";
  return Number(n).toLocaleString("en-US", {maximumFractionDigits: d === undefined ? 0 : d,
                                             minimumFractionDigits: d === undefined ? 0 : d});
}
function pct(x, d) { return (x === null || x === undefined) ? "–" : fmt(100 * x, d === undefined ? 1 : d) + "%"; }
function mb(b) { return b >= 1048576 ? fmt(b / 1048576, 2) + " MiB" : b >= 1024 ? fmt(b / 1024, 1) + " KiB" : fmt(b) + " B"; }
function us(c) { return fmt(c / (P.clock_ghz * 1e3), 2) + " µs"; }
function shape(s) { return (s || []).join("×"); }
function tag(t) { return '<span class="tag ' + esc(t) + '">' + esc(t) + "</span>"; }
function bar(x, hot) {
  var w = Math.max(0, Math.min(1, x || 0)) * 100;
  return '<div class="bar' + (hot ? " b" : "") + '"><i style="width:' + w.toFixed(1) + '%"></i></div>';
}
var STOPS = [[255, 247, 236], [253, 212, 158], [252, 141, 89], [215, 48, 31], [127, 0, 0]];
function heat(t) {
  t = Math.max(0, Math.min(1, t));
  var x = t * (STOPS.length - 1), i = Math.min(STOPS.length - 2, Math.floor(x)), f = x - i;
  var a = STOPS[i], b = STOPS[i + 1];
  return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); }).join(",") + ")";
}

// ---------------------------------------------------------------- header
(function header() {
  var T = D.totals, F = D.fusion, M = D.memory;
  var utils = Object.keys(T.pipe_utilisation).filter(function (p) { return T.pipe_utilisation[p] > 0; })
    .map(function (p) { return p + " " + pct(T.pipe_utilisation[p]); }).join(" · ");
  var types = Object.keys(T.time_by_type).map(function (t) { return t + " " + pct(T.time_by_type[t], 0); }).join(" · ");
  document.getElementById("top").innerHTML =
    "<h1>kiln report: " + esc(D.model) + "</h1>" +
    '<div class="sub">' + esc(D.onnx || "") + " · profile " + esc(P.name) + " at " + P.clock_ghz + " GHz (" +
    P.cube_cores + " Cube cores, " + P.vector_cores + " Vector cores) · simulated figures, not measured hardware</div>" +
    '<div class="cards">' +
    '<div class="card" id="total-latency"><b>' + us(T.simulated_cycles) + "</b><span>simulated latency, " +
    fmt(T.simulated_cycles) + " cycles (cost model: " + fmt(T.predicted_cycles) + ")</span></div>" +
    '<div class="card"><b>' + T.kernel_launches + " launches</b><span>" + T.unique_kernels + " unique kernels</span></div>" +
    '<div class="card" id="fusion-counts"><b>' + F.ir_ops_before + " → " + F.kernel_launches +
    "</b><span>IR ops before fusion → kernels after</span></div>" +
    '<div class="card"><b>' + mb(M.arena_bytes) + "</b><span>arena (lower bound " + mb(M.lower_bound_bytes) + ")</span></div>" +
    '<div class="card"><b>' + pct(T.cube_peak_share) + "</b><span>of the Cube fp16 peak (" + fmt(T.flops / 1e9, 2) +
    " GFLOP)</span></div>" +
    '<div class="card"><b>pipe utilisation</b><span>' + esc(utils) + "</span></div>" +
    '<div class="card"><b>time by type</b><span>' + esc(types) + "</span></div>" +
    ((D.aicpu || []).length ? '<div class="card" id="aicpu"><b>' + D.aicpu.length + " AI CPU step(s)</b><span>" +
     "no AI Core kernel, run between launches: " + D.aicpu.map(function (a) {
       return esc(a.step) + " (" + esc(a.op_types.join(", ")) + ", " + fmt(a.predicted_cycles) + " cycles predicted)";
     }).join(" · ") + "</span></div>" : "") +
    (MS ? '<div class="card measured" id="measured-total"><b>' + fmt(MS.total_cpu_ms, 2) + " ms</b><span>" +
     "measured CPU (host emulation, not Ascend time): median of " + MS.repeat + " runs, " + MS.threads + " threads, " + esc(MS.isa) +
     ", " + esc(MS.date) + " · " + esc(MS.file) + " · steps: kernels " + fmt(MS.kernel_cpu_ms, 2) + " ms, glue " +
     fmt(MS.glue_cpu_ms, 2) + " ms</span></div>" : "") +
    "</div>";
})();

// ---------------------------------------------------------------- graph
var NW = 236, NH = 42, GX = 46, GY = 38, PADX = 16, PADY = 14;
var all = D.terminals.concat(D.nodes), byId = {};
all.forEach(function (n) { byId[n.id] = n; });
var maxShare = Math.max.apply(null, D.nodes.map(function (n) { return n.share || 0; }).concat([1e-9]));
var hotKernels = {};
D.bottlenecks.forEach(function (b) { if (b.above_threshold) hotKernels[b.kernel] = true; });
var layers = {}, maxCols = 1, maxLayer = 0;
all.forEach(function (n) {
  (layers[n.layer] = layers[n.layer] || []).push(n);
  maxLayer = Math.max(maxLayer, n.layer);
});
Object.keys(layers).forEach(function (l) { maxCols = Math.max(maxCols, layers[l].length); });
var innerW = maxCols * NW + (maxCols - 1) * GX;
all.forEach(function (n) {
  var row = layers[n.layer], w = row.length * NW + (row.length - 1) * GX;
  n.x = PADX + (innerW - w) / 2 + n.col * (NW + GX);
  n.y = PADY + n.layer * (NH + GY);
});
function rightEdge(l0, l1) {
  var r = 0;
  for (var l = l0; l <= l1; l++) (layers[l] || []).forEach(function (n) { r = Math.max(r, n.x + NW); });
  return r;
}
var longs = D.edges.filter(function (e) { return byId[e.dst].layer - byId[e.src].layer > 1; })
  .sort(function (a, b) { return byId[a.src].layer - byId[b.src].layer; });
var laneEnd = [];
longs.forEach(function (e) {
  var s = byId[e.src].layer, t = byId[e.dst].layer, k = 0;
  while (laneEnd[k] !== undefined && laneEnd[k] >= s) k++;
  laneEnd[k] = t;
  e.lane = k;
});
var svgW = Math.max(innerW + 2 * PADX, rightEdge(0, maxLayer) + 30 + 12 * laneEnd.length + 90);
var svgH = PADY * 2 + (maxLayer + 1) * (NH + GY);
function edgePath(e) {
  var a = byId[e.src], b = byId[e.dst];
  if (b.layer - a.layer > 1) {
    var L = rightEdge(a.layer, b.layer) + 16 + 12 * e.lane, y1 = a.y + NH / 2, y2 = b.y + NH / 2;
    e.lx = L + 4; e.ly = (y1 + y2) / 2;
    return "M" + (a.x + NW) + " " + y1 + " C" + L + " " + y1 + " " + L + " " + y1 + " " + L + " " + (y1 + 14) +
      " V" + (y2 - 14) + " C" + L + " " + y2 + " " + L + " " + y2 + " " + (b.x + NW + 4) + " " + y2;
  }
  var x1 = a.x + NW / 2, y1b = a.y + NH, x2 = b.x + NW / 2, y2b = b.y - 4, ym = (y1b + y2b) / 2;
  e.lx = (x1 + x2) / 2 + 5; e.ly = ym + 3;
  return "M" + x1 + " " + y1b + " C" + x1 + " " + ym + " " + x2 + " " + ym + " " + x2 + " " + y2b;
}
(function drawGraph() {
  var s = ['<svg id="graph-svg" width="' + svgW + '" height="' + svgH + '" viewBox="0 0 ' + svgW + " " + svgH +
           '" role="img" aria-label="fused graph">',
           '<defs><marker id="arr" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto">' +
           '<path d="M0 0 L8 4 L0 8 z" fill="#9aa3b5"/></marker></defs><g id="edges">'];
  D.edges.forEach(function (e, i) {
    var d = edgePath(e), long = byId[e.dst].layer - byId[e.src].layer > 1;
    s.push('<path class="edge' + (long ? " long" : "") + '" id="e' + i + '" data-src="' + e.src + '" data-dst="' + e.dst +
           '" d="' + d + '" marker-end="url(#arr)"><title>' + esc(e.value + ": " + shape(e.shape) + " " + e.layout +
           " fp16, " + mb(e.bytes)) + "</title></path>");
    s.push('<text class="el" x="' + e.lx.toFixed(1) + '" y="' + e.ly.toFixed(1) + '">' + esc(shape(e.shape)) + "</text>");
  });
  s.push('</g><g id="nodes">');
  D.terminals.forEach(function (t) {
    s.push('<g class="io" transform="translate(' + t.x + "," + t.y + ')"><rect width="' + NW + '" height="' + NH +
           '" rx="18"/><text class="t1" x="12" y="17">' + esc(t.kind + ": " + t.name.replace(/^(input|output) /, "")) +
           '</text><text class="t2" x="12" y="33">' + esc(shape(t.shape)) + " fp32 (host)</text></g>");
  });
  D.nodes.forEach(function (n) {
    var t = (n.share || 0) / maxShare, fill = heat(t), fg = t > 0.62 ? "#fff" : "#1d2330";
    var k = D.kernels[n.kernel], name = n.name.length > 34 ? n.name.slice(0, 33) + "…" : n.name;
    var ops = n.ops.length > 1 ? n.op_types[0] + " + " + (n.ops.length - 1) + " fused" : n.op_types[0];
    s.push('<g class="node' + (hotKernels[n.kernel] ? " hot" : "") + '" id="' + n.id + '" data-idx="' + n.idx +
           '" data-kernel="' + esc(n.kernel) + '" tabindex="0" transform="translate(' + n.x + "," + n.y + ')">' +
           '<rect width="' + NW + '" height="' + NH + '" rx="6" fill="' + fill + '"/>' +
           '<text class="t1" x="8" y="16" fill="' + fg + '">' + esc(name) + "</text>" +
           '<text class="t2" x="8" y="33" fill="' + fg + '">' + esc(ops + " · " + pct(n.share) + " · " + k.type) + "</text>" +
           "<title>" + esc(n.kernel + "\n" + n.ops.join(", ") + "\n" + fmt(n.cycles) + " cycles (" + pct(n.share) +
           " of the model)" + (MS ? "\nmeasured CPU " + fmt(n.cpu_ms, 3) + " ms (" + pct(n.cpu_share) + ")" : "")) +
           "</title></g>");
  });
  s.push("</g></svg>");
  document.getElementById("graph").innerHTML = s.join("");
  var fit = document.getElementById("fit"), svg = document.getElementById("graph-svg");
  function applyFit() {  // wide graphs (parallel branches) shrink to the pane's width unless unticked
    var avail = document.getElementById("graph-scroll").clientWidth - 4;
    var w = fit.checked && avail > 200 && svgW > avail ? avail : svgW;
    svg.setAttribute("width", w);
    svg.setAttribute("height", svgH * w / svgW);
  }
  fit.addEventListener("change", applyFit);
  window.addEventListener("resize", applyFit);
  applyFit();
  document.getElementById("legend").innerHTML = "share of simulated time: 0" +
    '<span class="legend-grad" style="background:linear-gradient(90deg,' + [0, .25, .5, .75, 1].map(heat).join(",") +
    ')"></span>' + pct(maxShare) + ' · <span style="color:#b30000;font-weight:600">red outline</span>: bottleneck ≥ ' +
    pct(D.threshold, 0);
})();

// ---------------------------------------------------------------- detail panel
function pipeRows(k) {
  var order = ["M", "MTE1", "MTE2", "MTE3", "FIX", "V", "S"], pp = k.predicted_pipes, sp = k.stats.pipes;
  var maxBusy = Math.max.apply(null, order.map(function (p) { return (pp[p] || {}).busy || 0; }).concat([1]));
  return order.filter(function (p) { return (pp[p] && pp[p].instrs) || (sp[p] && sp[p].instrs); }).map(function (p) {
    var a = pp[p] || {instrs: 0, bytes: 0, busy: 0}, b = sp[p] || {};
    return "<tr><td>" + p + (p === k.bound_unit ? " ◀" : "") + '</td><td class="num">' + fmt(a.instrs) +
      '</td><td class="num">' + mb(a.bytes) + '</td><td class="num">' + fmt(a.busy) + "</td><td>" +
      bar(a.busy / maxBusy, p === k.bound_unit) + '</td><td class="num">' + pct(b.utilisation) + "</td></tr>";
  }).join("");
}
function roofSvg(r) {
  var W = 330, H = 170, L = 38, B = 24, xmin = -2, xmax = 4, ymin = 1, ymax = Math.log10(r.peaks.cube[0]) + 0.4;
  function X(ai) { return L + (Math.log10(Math.max(ai, 1e-3)) - xmin) / (xmax - xmin) * (W - L - 8); }
  function Y(f) {
    var v = Math.min(ymax, Math.max(ymin, Math.log10(Math.max(f, 1e-3))));
    return H - B - (v - ymin) / (ymax - ymin) * (H - B - 8);
  }
  var s = ['<svg width="' + W + '" height="' + H + '" class="roof">'];
  for (var e = xmin; e <= xmax; e++) {
    s.push('<line x1="' + X(Math.pow(10, e)) + '" x2="' + X(Math.pow(10, e)) + '" y1="8" y2="' + (H - B) + '" stroke="#eef0f4"/>');
    s.push('<text x="' + X(Math.pow(10, e)) + '" y="' + (H - 8) + '" font-size="9" text-anchor="middle" fill="#6b7486">' +
           (e < 0 ? "1e" + e : Math.pow(10, e)) + "</text>");
  }
  for (var f = Math.ceil(ymin); f <= ymax; f++)
    s.push('<text x="' + (L - 4) + '" y="' + (Y(Math.pow(10, f)) + 3) + '" font-size="9" text-anchor="end" fill="#6b7486">1e' + f + "</text>");
  ["cube", "vector"].forEach(function (u) {
    var pk = r.peaks[u][0], bw = r.peaks[u][1], ridge = pk / bw, col = u === r.unit ? (u === "cube" ? "#1f3f99" : "#24661a") : "#c9ced8";
    var a0 = Math.pow(10, xmin), a1 = Math.pow(10, xmax);
    s.push('<polyline fill="none" stroke="' + col + '" stroke-width="' + (u === r.unit ? 2 : 1) + '" points="' +
           X(a0) + "," + Y(a0 * bw) + " " + X(ridge) + "," + Y(pk) + " " + X(a1) + "," + Y(pk) + '"/>');
    s.push('<text x="' + (X(a1) - 2) + '" y="' + (Y(pk) - 3) + '" font-size="9" text-anchor="end" fill="' + col + '">' + u + " peak</text>");
  });
  s.push('<line x1="' + X(r.ridge) + '" x2="' + X(r.ridge) + '" y1="8" y2="' + (H - B) + '" stroke="#d7301f" stroke-dasharray="3 3"/>');
  s.push('<circle cx="' + X(r.ai) + '" cy="' + Y(r.achieved) + '" r="5" fill="#d7301f" stroke="#fff"><title>achieved ' +
         fmt(r.achieved) + " flop/cycle at " + fmt(r.ai, 2) + " flop/B</title></circle>");
  s.push('<text x="' + (W - 8) + '" y="' + (H - B - 4) + '" font-size="9" text-anchor="end" fill="#6b7486">flop/B →</text>');
  s.push('<text x="' + (L + 4) + '" y="12" font-size="9" fill="#6b7486">flop/cycle ↑</text>');
  s.push("</svg>");
  return s.join("");
}
function ganttSvg(k) {
  var g = k.trace.gantt_core0, pipes = ["M", "MTE1", "MTE2", "MTE3", "FIX", "V", "S"].filter(function (p) { return g[p]; });
  if (!pipes.length || !k.trace.cycles) return "";
  var W = 360, L = 40, RH = 14, H = pipes.length * (RH + 4) + 18, sc = (W - L - 6) / k.trace.cycles, s = [];
  s.push('<svg width="' + W + '" height="' + H + '" class="gantt">');
  pipes.forEach(function (p, i) {
    var y = 4 + i * (RH + 4);
    s.push('<text x="' + (L - 4) + '" y="' + (y + 11) + '" font-size="10" text-anchor="end" fill="#3b4456">' + p + "</text>");
    s.push('<rect x="' + L + '" y="' + y + '" width="' + (W - L - 6) + '" height="' + RH + '" fill="#f3f4f7"/>');
    g[p].forEach(function (iv) {
      s.push('<rect x="' + (L + iv[0] * sc).toFixed(1) + '" y="' + y + '" width="' + Math.max(0.6, (iv[1] - iv[0]) * sc).toFixed(1) +
             '" height="' + RH + '" fill="' + (p === k.bound_unit ? "#d7301f" : "#4f7be0") + '"/>');
    });
  });
  var y = H - 4;
  s.push('<text x="' + L + '" y="' + y + '" font-size="9" fill="#6b7486">0</text><text x="' + (W - 6) + '" y="' + y +
         '" font-size="9" text-anchor="end" fill="#6b7486">' + fmt(k.trace.cycles) + " cycles</text></svg>");
  return s.join("");
}
function suggestionHtml(sg, k) {
  if (!sg) return '<div class="sugg">' + esc(k.diagnosis || "") + '</div><div class="hint">tiling, relayout and ' +
    "algorithm replays are run for the bottleneck table's kernels</div>";
  var h = '<div class="sugg"><b>' + esc(sg.source) + ":</b> " + esc(sg.text) + "</div>";
  (sg.alternatives || []).forEach(function (a) { h += '<div class="sugg">' + esc(a.source) + ": " + esc(a.text) + "</div>"; });
  if (sg.diagnosis && sg.diagnosis !== sg.text) h += '<div class="hint">' + esc(sg.diagnosis) + "</div>";
  return h;
}
var selected = null;
function select(idx, scroll) {
  var n = D.nodes[idx]; if (!n) return;
  var k = D.kernels[n.kernel];
  if (selected !== null) { var o = document.getElementById(D.nodes[selected].id); if (o) o.classList.remove("sel"); }
  selected = idx;
  var el = document.getElementById(n.id); el.classList.add("sel");
  Array.prototype.forEach.call(document.querySelectorAll("path.edge"), function (p) {
    p.classList.toggle("hl", p.getAttribute("data-src") === n.id || p.getAttribute("data-dst") === n.id);
  });
  if (scroll && el.scrollIntoView) el.scrollIntoView({block: "center", inline: "nearest"});
  var fused = {};
  D.fusion.fused.forEach(function (f) { fused[f.node] = f; });
  var ops = n.ops.map(function (o) {
    var f = fused[o];
    return "<li><span class=\"mono\">" + esc(o) + "</span>" + (f ? " — fused: " + esc(f.pattern + ", " + f.where) : "") + "</li>";
  }).join("");
  var ins = D.edges.filter(function (e) { return e.dst === n.id; }).map(function (e) {
    return "<li>" + esc(e.value) + " " + esc(shape(e.shape)) + " " + esc(e.layout) + " (" + mb(e.bytes) + ")</li>"; }).join("");
  var r = k.roofline, f = k.features, tr = k.trace;
  var comp = Object.keys(k.compared_cycles).map(function (a) {
    return "<span>" + esc(a) + "=" + fmt(k.compared_cycles[a]) + (a === k.algorithm ? " ✓" : "") + "</span>"; }).join("");
  var traceRows = Object.keys(tr.pipes || {}).map(function (p) {
    var v = tr.pipes[p];
    return "<tr><td>" + p + '</td><td class="num">' + fmt(v.instrs) + '</td><td class="num">' + fmt(v.busy) +
      '</td><td class="num">' + pct(v.active_utilisation) + '</td><td class="mono">' +
      esc(v.mix.slice(0, 3).map(function (m) { return m[0] + "×" + m[1]; }).join(", ")) + "</td></tr>";
  }).join("");
  var others = k.launches.filter(function (i) { return i !== idx; }).map(function (i) {
    return '<a href="#" data-goto="' + i + '">' + esc(D.nodes[i].name) + "</a>"; }).join(", ");
  var h = [];
  h.push('<h2 id="detail-kernel" class="mono" data-kernel="' + esc(k.name) + '">' + esc(k.name) + "</h2>");
  h.push('<div class="hint">launch #' + idx + " <b>" + esc(n.name) + "</b>: " + fmt(n.cycles) + " simulated cycles (" +
         us(n.cycles) + ", " + pct(n.share) + " of the model); cost model " + fmt(k.predicted_cycles) + "</div>");
  if (MS) {  // measured (kiln bench --profile) beside the predictions
    var many = k.launches.length > 1;
    h.push('<div class="kv measured" id="detail-measured"><div>measured CPU ms (host emulation)</div><div><b>' +
           fmt(n.cpu_ms, 3) + " ms</b> this launch (" + pct(n.cpu_share) + " of the measured steps)" +
           (many ? "; " + fmt(k.cpu_ms_total, 3) + " ms over its " + k.launches.length + " launches" : "") +
           "</div><div>simulated cycles</div><div>" + fmt(n.measured_cycles) + " in the measured run · " +
           fmt(n.cycles) + " in this report's run · " + fmt(k.predicted_cycles) + " predicted (cost model)" +
           "</div><div>share</div><div>" + pct(n.share) + " of the simulated time vs " + pct(n.cpu_share) +
           " of the measured CPU time</div></div>");
  }
  h.push("<p>" + tag(k.type) + " bound unit <b>" + esc(k.bound_unit || "–") + "</b>, busy " + pct(k.bound_utilisation) +
         " of the time on the cores that run it</p>");
  h.push("<h3>Source ops</h3><ul>" + ops + "</ul>" + (ins ? "<h3>Inputs</h3><ul>" + ins + "</ul>" : ""));
  h.push('<h3>Opspec and variant</h3><div class="kv"><div>opspec</div><div class="mono">' + esc(k.opspec) +
         '</div><div>family</div><div class="mono">' + esc(k.family) + '</div><div>variant</div><div class="mono">' +
         esc(k.variant) + "</div><div>algorithm</div><div>" + esc(k.algorithm || "–") + "</div><div>blocks</div><div>" +
         k.blocks + " (" + k.stats.cores_used + " of " + k.stats.cores_available + " cores, " + esc(k.stats.core_kind) + ")</div></div>");
  h.push('<div class="chips">tiling: ' + Object.keys(k.tiling).map(function (t) { return "<span>" + esc(t) + "=" + k.tiling[t] + "</span>"; }).join("") + "</div>");
  if (comp) h.push('<div class="chips">algorithms compared (cycles): ' + comp + "</div>");
  h.push('<div class="chips">buffers: ' + Object.keys(k.buffers).filter(function (b) { return k.buffers[b]; })
         .map(function (b) { return "<span>" + esc(b) + " " + mb(k.buffers[b]) + "</span>"; }).join("") + "</div>");
  var KEY = ["flops", "bytes", "arithmetic_intensity", "reduction_length", "c0_padding_waste"];
  function chip(t) { return "<span>" + esc(t) + "=" + esc(f[t]) + "</span>"; }
  var rest = Object.keys(f).filter(function (t) { return KEY.indexOf(t) < 0; });
  h.push('<div class="chips">features: ' + KEY.filter(function (t) { return t in f; }).map(chip).join("") + "</div>" +
         (rest.length ? '<details class="chips"><summary>all ' + Object.keys(f).length + " opspec features</summary>" +
          rest.map(chip).join("") + "</details>" : ""));
  h.push('<h3>Pipes</h3><table class="pipes"><tr><th>pipe</th><th class="num">instrs</th><th class="num">bytes</th>' +
         '<th class="num">busy (pred.)</th><th></th><th class="num">util (emul.)</th></tr>' + pipeRows(k) + "</table>" +
         '<div class="hint">busy: cycles summed over cores (cost model, equal to the emulator); util: busy / (cycles × ' +
         k.stats.cores_available + " cores available), from the emulator's counters</div>");
  h.push("<h3>Roofline</h3>" + roofSvg(r) + '<div class="hint">arithmetic intensity ' + fmt(r.ai, 1) +
         " flop/B (" + (r.ai_moved ? fmt(r.ai_moved, 1) + " flop/B of the bytes actually moved" : "–") + ") vs the " + esc(r.unit) +
         " ridge " + fmt(r.ridge, 1) + " flop/B: <b>" + esc(r.side) + "-bound side</b>; achieved " + fmt(r.achieved) +
         " flop/cycle = " + pct(r.of_attainable) + " of the attainable " + fmt(r.attainable) + "</div>");
  h.push("<h3>Suggestion</h3>" + suggestionHtml(k.suggestion, k));
  h.push("<h3>Instruction trace (cost-model replay)</h3>" + (tr.cycles ?
         '<div class="hint">' + fmt(tr.events) + " instructions; " + tr.phases.map(function (p) {
           return esc(p.unit) + " launch " + fmt(p.cycles) + " cycles on " + p.cores + " cores"; }).join(", then ") +
         '. Core 0 timeline:</div>' + ganttSvg(k) +
         '<table class="trace"><tr><th>pipe</th><th class="num">instrs</th><th class="num">busy</th><th class="num">active util</th><th>top instructions</th></tr>' +
         traceRows + "</table>" : '<div class="hint">no replay for this family</div>'));
  h.push("<h3>[OPT] log</h3>" + (k.log === null ? '<div class="hint">this build has no optimisation-path log ' +
         "(DEBUG_OPTIMIZATION_PATH=ON)</div>" : "<pre>" + esc(k.log.join("\n") || "(no lines)") + "</pre>"));
  if (others) h.push("<h3>Other launches of this kernel</h3><p>" + others + "</p>");
  var det = document.getElementById("detail");
  det.innerHTML = h.join("");
  det.setAttribute("data-kernel", k.name);
  det.scrollTop = 0;
}
document.getElementById("graph").addEventListener("click", function (ev) {
  var g = ev.target.closest ? ev.target.closest("g.node") : null;
  if (g) select(Number(g.getAttribute("data-idx")), false);
});
document.getElementById("graph").addEventListener("keydown", function (ev) {
  var g = ev.target.closest ? ev.target.closest("g.node") : null;
  if (g && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); select(Number(g.getAttribute("data-idx")), false); }
});
document.getElementById("detail").addEventListener("click", function (ev) {
  var a = ev.target.closest ? ev.target.closest("a[data-goto]") : null;
  if (a) { ev.preventDefault(); select(Number(a.getAttribute("data-goto")), true); }
});

// ---------------------------------------------------------------- bottleneck table
(function bottlenecks() {
  var rows = D.bottlenecks.map(function (b, i) {
    var g = b.predicted_cycles !== null && b.predicted_cycles !== undefined;
    return '<tr class="click" data-launch="' + b.launches[0] + '"><td class="num">' + (i + 1) + '</td><td class="mono">' +
      esc(b.kernel) + '<div class="hint">' + esc(b.launches.map(function (j) { return D.nodes[j].name; }).join(", ")) +
      '</div></td><td class="num">' + pct(b.share) + (b.above_threshold ? "" : '<div class="hint">top-3</div>') +
      '</td><td class="num">' + fmt(b.cycles) + "</td>" +
      (MS ? '<td class="num cpu-share">' + pct(b.cpu_share) + '<div class="hint">' + fmt(b.cpu_ms, 3) + " ms</div></td>" : "") +
      "<td>" + tag(b.type) + '<div class="hint">' + esc(b.bound_pipe || "") +
      " " + pct(b.bound_utilisation, 0) + "</div></td><td>" + esc(b.suggestion) + "</td><td class=\"num\">" +
      (g ? '<span class="gain">' + pct(-b.gain) + "</span><div class=\"hint\">model " + pct(-b.model_gain) + "</div>" : "–") + "</td></tr>";
  }).join("");
  document.getElementById("bottlenecks").innerHTML =
    "<h2>Bottlenecks</h2><p class=\"hint\">Kernels with at least " + pct(D.threshold, 0) +
    " of the simulated time (all launches of the kernel together), and always the top three. Type from the predicted pipes; " +
    "the suggestion is a cost-model replay (tilings the kernel's buffers allow, a relayout of the input, another " +
    "algorithm) or, when none is predicted faster, what limits the kernel." +
    (MS ? " Measured CPU share: the kernel's host CPU time (all launches, medians from " + esc(MS.file) +
          ") over the sum of every step's; the emulation's cost on this CPU, not Ascend time." : "") + "</p>" +
    '<table id="bottleneck-table"><tr><th class="num">#</th><th>kernel (launches)</th><th class="num">share</th>' +
    '<th class="num">cycles</th>' + (MS ? '<th class="num" id="cpu-share-head">measured CPU share</th>' : "") +
    '<th>type</th><th>suggestion</th><th class="num">predicted gain</th></tr>' + rows + "</table>";
  Array.prototype.forEach.call(document.querySelectorAll("#bottleneck-table tr.click"), function (tr) {
    tr.addEventListener("click", function () { select(Number(tr.getAttribute("data-launch")), true); });
  });
})();

// ---------------------------------------------------------------- memory plan
(function memory() {
  var M = D.memory, W = 960, H = 330, L = 70, R = 16, T = 12, B = 34;
  var top = Math.max(M.arena_bytes, M.lower_bound_bytes) * 1.06 || 1, steps = Math.max(1, M.steps);
  function X(s) { return L + s / steps * (W - L - R); }
  function Y(b) { return H - B - b / top * (H - B - T); }
  var s = ['<svg id="memory-svg" width="' + W + '" height="' + H + '">'];
  for (var i = 0; i <= 5; i++) {
    var b = top * i / 5;
    s.push('<line x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(b) + '" y2="' + Y(b) + '" stroke="#eef0f4"/>' +
           '<text x="' + (L - 6) + '" y="' + (Y(b) + 3) + '" font-size="10" text-anchor="end" fill="#6b7486">' + mb(b) + "</text>");
  }
  var tick = Math.max(1, Math.round(steps / 12));
  for (var st = 0; st <= steps; st += tick)
    s.push('<text x="' + X(st) + '" y="' + (H - B + 14) + '" font-size="10" text-anchor="middle" fill="#6b7486">' + st + "</text>");
  s.push('<text x="' + ((L + W) / 2) + '" y="' + (H - 4) + '" font-size="11" text-anchor="middle" fill="#3b4456">step (launch order)</text>');
  M.tensors.forEach(function (t, i) {
    var hue = (i * 47) % 360;
    s.push('<rect class="tensor" x="' + X(t.first).toFixed(1) + '" y="' + Y(t.offset + t.bytes).toFixed(1) + '" width="' +
           Math.max(1, X(t.last + 1) - X(t.first)).toFixed(1) + '" height="' + Math.max(1, Y(t.offset) - Y(t.offset + t.bytes)).toFixed(1) +
           '" fill="hsl(' + hue + ',55%,72%)" stroke="hsl(' + hue + ',45%,45%)" stroke-width="0.6"><title>' +
           esc(t.name + ": " + mb(t.bytes) + " at offset " + fmt(t.offset) + ", steps " + t.first + "–" + t.last +
               " (" + M.step_names[t.first] + " → " + M.step_names[t.last] + ")") + "</title></rect>");
  });
  s.push('<line id="lower-bound" x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(M.lower_bound_bytes) + '" y2="' + Y(M.lower_bound_bytes) +
         '" stroke="#d7301f" stroke-width="1.5" stroke-dasharray="6 4"/><text x="' + (W - R - 4) + '" y="' + (Y(M.lower_bound_bytes) - 4) +
         '" font-size="10" text-anchor="end" fill="#d7301f">lower bound ' + mb(M.lower_bound_bytes) + "</text>");
  if (M.arena_bytes !== M.lower_bound_bytes)
    s.push('<line x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(M.arena_bytes) + '" y2="' + Y(M.arena_bytes) +
           '" stroke="#1d2330" stroke-width="1"/><text x="' + (L + 4) + '" y="' + (Y(M.arena_bytes) - 4) +
           '" font-size="10" fill="#1d2330">arena ' + mb(M.arena_bytes) + "</text>");
  s.push("</svg>");
  document.getElementById("memory").innerHTML = "<h2>Memory plan</h2><p class=\"hint\">Arena " + mb(M.arena_bytes) +
    " (" + esc(M.strategy) + ", fragmentation " + pct(M.fragmentation, 2) + "), lower bound " + mb(M.lower_bound_bytes) +
    " (peak of live bytes), without reuse " + mb(M.naive_bytes) + "; " + M.in_place + " outputs in place. Each box is one " +
    "intermediate tensor: its arena offset range over the steps it is live.</p>" + s.join("");
})();

// ---------------------------------------------------------------- fusion
(function fusion() {
  var F = D.fusion;
  var pats = Object.keys(F.patterns).map(function (p) { return "<tr><td>" + esc(p) + '</td><td class="num">' + F.patterns[p] + "</td></tr>"; }).join("");
  var list = F.fused.map(function (f) { return "<tr><td class=\"mono\">" + esc(f.node) + "</td><td class=\"mono\">" + esc(f.into) +
    "</td><td>" + esc(f.pattern) + "</td><td>" + esc(f.where) + "</td></tr>"; }).join("");
  document.getElementById("fusion").innerHTML = "<h2>Fusion</h2><p id=\"fusion-summary\">" + F.ir_ops_before +
    " IR ops before fusion → " + F.kernel_launches + " kernel launches after (" + F.source_ops_in_kernels +
    " source ops inside them; " + F.fused.length + " ops fused into another op's kernel)" +
    (F.audit.length ? "; audit: " + esc(JSON.stringify(F.audit)) : "") + ".</p>" +
    (pats ? '<table style="max-width:560px"><tr><th>pattern</th><th class="num">count</th></tr>' + pats + "</table>" +
            "<details><summary>every fused op</summary><table><tr><th>op</th><th>into</th><th>pattern</th><th>where</th></tr>" +
            list + "</table></details>" : "<p class=\"hint\">nothing fused in this model</p>");
})();

document.getElementById("notes").innerHTML = "Simulated figures for profile " + esc(P.name) +
  " from the emulator (one seeded run of the model) and the cost model; instruction traces: " + esc(D.trace_note) +
  "." + (MS ? " Measured: " + esc(MS.file) + " (" + esc(MS.format) + ", " + esc(MS.date) + "), median host wall " +
  "time of each step of the emulation over " + MS.repeat + " runs at " + MS.threads + " threads (" + esc(MS.isa) +
  "); total " + fmt(MS.total_cpu_ms, 2) + " ms, simulated " + fmt(MS.simulated_cycles) + " cycles in that run." : "") +
  " Options: " + esc(Object.keys(D.options).map(function (k) { return k + "=" + JSON.stringify(D.options[k]); }).join(", ")) + ".";
window.kilnReport = {select: select, nodes: D.nodes.length};
document.documentElement.setAttribute("data-rendered", String(D.nodes.length));
})();
