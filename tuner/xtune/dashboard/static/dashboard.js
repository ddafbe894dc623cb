// xtune dashboard: polls /api/state and redraws in place (no reload, no outside scripts).
"use strict";

const params = new URLSearchParams(location.search);
const pollMs = Number(params.get("poll") || 1000);
let chosen = params.get("experiment");

function fmt(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  return String(Number(v.toPrecision(5)));
}

function fmtValues(obj) {
  return Object.entries(obj || {}).map(([k, v]) => `${k}=${fmt(v)}`).join(", ");
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function fill(id, rows, draw) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren();
  for (const r of rows) draw(body.insertRow(), r);
}

function setText(id, text) {
  document.getElementById(id).textContent = text;
}

function chart(name, points) {
  const w = 420, h = 130, pad = 4;
  const div = document.createElement("div");
  div.className = "chart";
  const title = document.createElement("div");
  title.className = "small";
  div.appendChild(title);
  if (!points.length) {
    title.textContent = `${name}: no data`;
    return div;
  }
  const xs = points.map(p => p[0]), ys = points.map(p => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  const sx = x => pad + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (w - 2 * pad);
  const sy = y => h - pad - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * (h - 2 * pad);
  title.textContent = `${name}: ${fmt(ys[ys.length - 1])} (min ${fmt(y0)}, max ${fmt(y1)}, ` +
    `${points.length} points over ${fmt(x1 - x0)} s)`;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "#2a6");
  line.setAttribute("stroke-width", "1.5");
  line.setAttribute("points", points.map(p => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" "));
  svg.appendChild(line);
  div.appendChild(svg);
  return div;
}

function render(s) {
  const select = document.getElementById("experiment");
  const ids = s.experiments.map(e => String(e.id)).join(",");
  if (select.dataset.ids !== ids) {
    select.replaceChildren();
    for (const e of s.experiments.slice().reverse()) {
      select.add(new Option(`${e.id}: ${e.name}`, String(e.id)));
    }
    select.dataset.ids = ids;
  }
  const k = s.knobs;
  setText("knob-source", k.running ? `(xrtd at ${k.socket})` : `(xrtd at ${k.socket}: not running)`);
  const exp = s.experiment;
  if (!exp) {
    setText("experiment-name", "no experiment in the store");
    return;
  }
  select.value = String(exp.id);
  setText("experiment-name", exp.name);
  setText("objective-expr", `${exp.goal} ${exp.expression}`);
  setText("trial-count", String(exp.trials.length));
  const best = document.getElementById("best-objective");
  best.textContent = exp.best ? exp.best.objective_text : "none feasible yet";
  best.dataset.value = exp.best ? String(exp.best.objective) : "";
  setText("best-trial", exp.best ? `trial ${exp.best.index}: ${fmtValues(exp.best.params)}` : "");
  setText("baseline", exp.baseline_text);
  setText("rollback-count", String(exp.rollbacks.length));

  fill("margins", Object.entries(exp.margins), (row, [line, m]) => {
    cell(row, line);
    cell(row, exp.margins_text[line], m < 0 ? "num neg" : "num");
  });
  if (k.running) {
    fill("knobs", k.knobs, (row, kn) => {
      cell(row, kn.name);
      cell(row, fmt(kn.value), "num");
      cell(row, kn.state);
      cell(row, `${kn.backend}:${kn.target}`);
    });
  } else {
    fill("knobs", Object.entries(exp.knobs_recorded), (row, [name, v]) => {
      cell(row, name);
      cell(row, fmt(v), "num");
      cell(row, "not running");
      cell(row, "last recorded value");
    });
  }
  fill("trials", exp.trials, (row, t) => {
    if (exp.best && t.index === exp.best.index) row.className = "best";
    else if (t.status !== "completed") row.className = "infeasible";
    cell(row, String(t.index), "num");
    cell(row, t.policy);
    cell(row, t.status);
    cell(row, t.objective_text, "num");
    cell(row, fmtValues(t.params));
  });
  fill("rollbacks", exp.rollbacks, (row, r) => {
    cell(row, r.trial === null ? "–" : String(r.trial), "num");
    cell(row, new Date(r.t * 1000).toLocaleTimeString());
    cell(row, r.reason, "reason");
    cell(row, fmtValues(r.bad));
    cell(row, fmtValues(r.restored));
    cell(row, String(r.windows), "num");
  });

  const p = s.prometheus;
  const hosts = p && !p.error ? p.hosts : [];
  setText("host-knob-source", !p ? "(needs --prometheus: a run on several hosts exports each host as a target)"
    : p.error ? `(Prometheus ${p.url}: ${p.error})`
    : hosts.length ? `(from Prometheus ${p.url}, by host)`
    : `(Prometheus ${p.url} has no series with a host label for this run)`);
  fill("host-knobs", hosts, (row, h) => {
    if (h.desired !== h.applied) row.className = "differs";
    cell(row, h.host);
    cell(row, h.knob);
    cell(row, fmt(h.desired), "num");
    cell(row, fmt(h.applied), "num");
    cell(row, h.exported ? "now" : "no longer: last values");
  });

  let series = exp.series, source = "(from the trial store)";
  if (p) {
    source = p.error ? `(Prometheus ${p.url}: ${p.error}; from the trial store)`
      : `(from Prometheus ${p.url} and the trial store)`;
    series = p.series.concat(series);
  }
  setText("series-source", source);
  document.getElementById("charts").replaceChildren(...series.map(x => chart(x.name, x.points)));
}

async function poll() {
  try {
    const q = chosen ? `?experiment=${encodeURIComponent(chosen)}` : "";
    const r = await fetch(`api/state${q}`, { cache: "no-store" });
    if (!r.ok) throw new Error(`${r.status} ${await r.text()}`);
    const s = await r.json();
    render(s);
    const status = document.getElementById("status");
    status.textContent = `updated ${new Date(s.generated * 1000).toLocaleTimeString()}`;
    status.dataset.generated = String(s.generated);
  } catch (e) {
    setText("status", `error: ${e.message}`);
  }
  setTimeout(poll, pollMs);
}

document.getElementById("experiment").addEventListener("change", e => {
  chosen = e.target.value;  // the next poll (within pollMs) shows it
});
poll();
