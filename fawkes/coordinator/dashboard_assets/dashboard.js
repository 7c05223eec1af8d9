// The fawkes dashboard: fetch /api/state every few seconds and redraw. No library, no network
// beyond this server. Every value from the state is inserted as text (never as HTML).
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
const ROLES = ["core", "transient", "transient-core"];

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c === null || c === undefined ? "" : c);
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function swatch(color) {
  const s = el("span", { class: "swatch" });
  s.style.background = color;  // CSSOM, allowed by the page's Content-Security-Policy (a style attribute is not)
  return s;
}

function fmt(x, digits) {
  return x === null || x === undefined ? "–" : Number(x).toFixed(digits === undefined ? 3 : digits);
}

function clock(t) {
  return t ? new Date(t * 1000).toLocaleTimeString([], { hour12: false }) : "";
}

function colors(state) {
  const names = [...new Set([...state.clusters.map(c => c.name), ...Object.keys(state.allocation)])].sort();
  return Object.fromEntries(names.map((n, i) => [n, PALETTE[i % PALETTE.length]]));
}

function fillBody(table, rows) {
  const body = table.tBodies[0];
  body.replaceChildren(...rows);
}

function renderClusters(state, color) {
  const rows = state.clusters.map(c => {
    const nodes = el("td", { class: "nodes" }, ...c.nodes.map(n =>
      el("span", { class: `node ${n.role} ${n.state}`, title: `${n.role}, ${n.state}`, "data-role": n.role,
                   "data-state": n.state }, `${n.host} ${n.role === "core" ? "core" : n.role === "transient" ? "TR" : "TC"}${n.state === "running" ? "" : " (" + n.state + ")"}`)));
    const tr = el("tr", { "data-cluster": c.name, "data-state": c.state },
      el("td", {}, swatch(color[c.name]), c.name, el("span", { class: "muted kind" }, ` ${c.kind || c.framework}`),
         ...(c.web_ui && /^https?:\/\//.test(c.web_ui)
             ? [" ", el("a", { href: c.web_ui, target: "_blank", rel: "noopener noreferrer", class: "web-ui" }, "UI")]
             : [])),
      el("td", { class: "state" }, c.state + (c.queue_position ? ` (#${c.queue_position} in queue)` : "")
                                   + (c.release_requested ? ", release requested" : "")),
      el("td", { class: "num" }, c.min_core),
      ...ROLES.map(r => el("td", { class: `num role-${r}` }, c.by_role[r] || 0)),
      el("td", { class: "num held" }, c.held + (c.draining ? ` (${c.draining} draining)` : "") + (c.suspended ? ` (+${c.suspended} suspended)` : "")),
      el("td", { class: "num" }, c.target === null ? "–" : c.target),
      el("td", { class: "num" }, fmt(c.weight)),
      el("td", { class: "num" }, fmt(c.discrimination, 2)),
      el("td", { class: "num" }, `${c.queued_jobs} / ${c.running_jobs}`),
      nodes);
    return tr;
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 12, class: "muted" }, "no MR-cluster")));
  fillBody(document.getElementById("clusters"), rows);
  const hosts = Object.entries(state.hosts).map(([k, v]) => `${v} ${k}`).join(", ");
  document.getElementById("hosts").textContent = `pool hosts: ${hosts || "none"}`;
}

// A line chart of series {name: [[t, y], ...]} into <svg id>; step: hold each value until the next.
function chart(id, series, color, opts) {
  const box = document.getElementById(id);
  const W = box.clientWidth || 400, H = box.clientHeight || 190, L = 38, R = 8, T = 8, B = 20;
  box.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const pts = Object.values(series).flat();
  const kids = [];
  if (!pts.length) {
    kids.push(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no data yet"));
    box.replaceChildren(...kids);
    return;
  }
  let t0 = Math.min(...pts.map(p => p[0])), t1 = Math.max(...pts.map(p => p[0]), opts.now || 0);
  if (t1 <= t0) t1 = t0 + 1;
  let y0 = Math.min(0, ...pts.map(p => p[1])), y1 = Math.max(...pts.map(p => p[1]), opts.minTop || 0);
  if (y1 <= y0) y1 = y0 + 1;
  const step = niceStep((y1 - y0) / 4, opts.integer);
  y0 = Math.floor(y0 / step + 1e-9) * step;
  y1 = Math.ceil(y1 / step - 1e-9) * step;
  const x = t => L + (t - t0) / (t1 - t0) * (W - L - R);
  const y = v => T + (1 - (v - y0) / (y1 - y0)) * (H - T - B);
  let digits = 0;
  while (digits < 4 && Math.abs(Math.round(step * 10 ** digits) - step * 10 ** digits) > 1e-9) digits++;
  for (let v = y0; v <= y1 + step / 2; v += step) {
    kids.push(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    kids.push(svg("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, v.toFixed(digits)));
  }
  kids.push(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  kids.push(svg("line", { class: "axis", x1: L, x2: W - R, y1: y(Math.max(y0, 0)), y2: y(Math.max(y0, 0)) }));
  kids.push(svg("text", { x: L, y: H - 6 }, clock(t0)));
  kids.push(svg("text", { x: W - R, y: H - 6, "text-anchor": "end" }, clock(t1)));
  for (const [name, s] of Object.entries(series)) {
    if (!s.length) continue;
    let d = "";
    s.forEach((p, i) => {
      if (i === 0) d += `M${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`;
      else {
        if (opts.step) d += `H${x(p[0]).toFixed(1)}`;
        d += `${opts.step ? "V" + y(p[1]).toFixed(1) : "L" + x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)}`;
      }
    });
    const line = svg("path", { d, fill: "none", stroke: color[name] || "#444", "stroke-width": 2, "data-cluster": name });
    line.append(svg("title", {}, name));
    const last = s[s.length - 1];  // a dot at the latest value: a series of one point shows too
    const dot = svg("circle", { cx: x(last[0]).toFixed(1), cy: y(last[1]).toFixed(1), r: 3, fill: color[name] || "#444" });
    dot.append(svg("title", {}, `${name}: ${opts.integer ? last[1] : fmt(last[1])}`));
    kids.push(line, dot);
  }
  box.replaceChildren(...kids);
}

// A round grid step (1, 2, 2.5 or 5 times a power of ten) near raw; at least 1 for integers.
function niceStep(raw, integer) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  let step = [1, 2, 2.5, 5, 10].map(m => m * p).find(s => s >= raw - 1e-12);
  if (integer) step = Math.max(1, Math.ceil(step));
  return step;
}

function perCluster(ticks, key) {
  const out = {};
  for (const t of ticks)
    for (const [name, v] of Object.entries(t[key]))
      if (v !== null) (out[name] = out[name] || []).push([t.time, v]);
  return out;
}

function renderDecisions(state) {
  const items = state.decisions.map(d => {
    const plan = [...d.grows.map(g => `+ ${g.cluster}: ${g.host} as ${g.role}`),
                  ...d.shrinks.map(s => `− ${s.cluster}: ${s.node} (${s.role}, ${s.mode})`)];
    return el("li", { "data-tick": d.tick, value: d.tick },
      el("strong", {}, `tick ${d.tick}`), ` ${clock(d.time)} · ${d.policy} · global ${fmt(d.global_factor, 2)}, gate ${d.gate_open ? "open" : "closed"}: `,
      d.reason, plan.length ? el("div", { class: "plan" }, plan.join("; ")) : "");
  });
  if (!items.length) items.push(el("li", { class: "muted" }, "no decision yet"));
  document.getElementById("decisions").replaceChildren(...items);
}

function renderJobs(state) {
  fillBody(document.getElementById("jobs"), state.jobs.map(j =>
    el("tr", { "data-job": j.id, "data-state": j.state }, el("td", { class: "num" }, j.id), el("td", {}, j.cluster),
       el("td", {}, j.state), el("td", {}, clock(j.submitted_at)), el("td", {}, clock(j.started_at)),
       el("td", {}, clock(j.ended_at)), el("td", {}, j.detail || ""))));
  fillBody(document.getElementById("events"), state.events.map(e =>
    el("tr", { class: `level-${e.level}` }, el("td", {}, clock(e.time)), el("td", {}, e.level), el("td", {}, e.kind),
       el("td", {}, e.cluster || ""), el("td", {}, e.message + (e.node ? ` [${e.node}]` : "")))));
}

function render(state) {
  const color = colors(state);
  document.getElementById("summary").textContent = state.tick === null ? "no decision yet" :
    `policy ${state.policy} · tick ${state.tick} at ${clock(state.decided_at)} · global discrimination ${fmt(state.global_factor, 2)} (gate ${state.gate_open ? "open" : "closed"})`;
  renderClusters(state, color);
  chart("chart-allocation", state.allocation, color, { step: true, integer: true, now: state.now, minTop: 1 });
  chart("chart-weights", perCluster(state.ticks, "weights"), color, { now: state.now, minTop: 1 });
  chart("chart-discrimination", perCluster(state.ticks, "discriminations"), color, { now: state.now });
  renderDecisions(state);
  renderJobs(state);
}

let refreshes = 0;

async function refresh() {
  const status = document.getElementById("updated"), error = document.getElementById("error");
  try {
    const r = await fetch("/api/state", { cache: "no-store" });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    render(body);
    refreshes += 1;
    document.body.dataset.refreshes = refreshes;
    status.textContent = `updated ${clock(body.now)}`;
    error.hidden = true;
  } catch (e) {
    error.textContent = `cannot read the state: ${e.message}`;
    error.hidden = false;
  }
}

// The next fetch starts a refresh period after the last one ended: a slow state never piles up requests.
document.addEventListener("DOMContentLoaded", () => {
  const every = Math.max(1, Number(document.body.dataset.refreshS) || 3) * 1000;
  const loop = () => refresh().finally(() => setTimeout(loop, every));
  loop();
});
