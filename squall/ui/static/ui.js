// squall's web UI: renders the REST API (/api/v1/) into the page and refreshes it
// every REFRESH_MS without reloading. Every value from the server is written as text
// (textContent), never as HTML: component names and error messages are user data.
// The charts are drawn by uPlot (static/uPlot.iife.min.js, MIT) from the samples the
// server keeps (/api/v1/topology/NAME/series), so they survive a reload.
"use strict";

const REFRESH_MS = 2000;
const API = "/api/v1/";
const WINDOWS = [["600", "10 minutes"], ["10800", "3 hours"], ["86400", "1 day"], [":all-time", "All time"]];

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

function link(href, text) { return el("a", { href }, text); }
function number(value) { return typeof value === "number" ? value.toLocaleString("en-US") : value; }
function enc(value) { return encodeURIComponent(value); }

// The p99 of a latency (its percentiles as the REST API gives them), for a table cell.
function p99(field) { return (row) => (row[field] && row[field]["99"]) || "-"; }

function table(columns, rows, key) {
  const head = el("tr", {}, ...columns.map(([title]) => el("th", {}, title)));
  const body = rows.map((row) => el("tr", { "data-row": key ? row[key] : undefined },
    ...columns.map(([title, field, render]) => {
      const value = render ? render(row) : number(row[field]);
      const numeric = typeof value === "number" || (typeof value === "string" && value !== "" && !isNaN(Number(value.replaceAll(",", ""))));
      return el("td", { "data-field": field, class: numeric ? undefined : "text" }, value);
    })));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
}

async function api(path, options) {
  const answer = await fetch(API + path, { credentials: "same-origin", ...options });
  const body = await answer.json();
  if (!answer.ok) throw new Error(body.errorMessage || answer.statusText);
  return body;
}

function route() {
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "topology" && parts.length === 2) return { page: "topology", name: parts[1] };
  if (parts[0] === "topology" && parts[2] === "component" && parts.length === 4) {
    return { page: "component", name: parts[1], component: parts[3] };
  }
  return { page: "cluster" };
}

function windowParam() {
  return new URLSearchParams(location.search).get("window") || ":all-time";
}

function windowPicker() {
  const select = el("select", { id: "window", "aria-label": "window" },
    ...WINDOWS.map(([value, label]) => el("option", { value }, label)));
  select.value = windowParam();
  select.addEventListener("change", () => {
    const query = new URLSearchParams(location.search);
    query.set("window", select.value);
    history.replaceState(null, "", `${location.pathname}?${query}`);
    refresh();
  });
  return el("label", {}, "Window ", select);
}

function crumbs(where) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren(link("/", "Cluster"));
  if (where.name) nav.append(" / ", link(`/topology/${enc(where.name)}`, where.name));
  if (where.component) nav.append(" / ", where.component);
}

function statusCell(status) { return el("span", { class: `status ${status}`, "data-status": status }, status); }

function errorCell(row) {
  if (!row.lastError) return "";
  return el("span", { class: "error", title: `task ${row.errorTask}, ${row.errorLapsedSecs} s ago` }, row.lastError);
}

const COLOURS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d"];
const CHART_HEIGHT = 190;

// Two charts a row, as wide as the page lets them be.
function chartWidth(container) {
  return Math.max(320, Math.floor((container.clientWidth - 16) / 2) - 18);
}

// Tick labels of the time axis: hours and minutes, seconds too within an hour.
function clockTicks(u, splits) {
  const span = u.scales.x.max - u.scales.x.min;
  const options = span < 3600 ? { hour: "2-digit", minute: "2-digit", second: "2-digit" }
    : span < 86400 ? { hour: "2-digit", minute: "2-digit" }
      : { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" };
  return splits.map((v) => new Date(v * 1000).toLocaleTimeString([], options));
}

// Value ticks short enough to leave the axis label room: 600k, 1.2M, 0.25.
function valueTicks(u, splits) {
  return splits.map((v) => {
    if (v == null) return "";
    const size = Math.abs(v);
    if (size >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
    if (size >= 1e4) return `${+(v / 1e3).toFixed(0)}k`;
    return v.toLocaleString(undefined, { maximumFractionDigits: 3 });
  });
}

// One chart: a titled box whose uPlot is made on the first data and updated after;
// made anew when its series change (a bolt appears, the latency turns p99).
function chart(container, id, title) {
  let box = document.getElementById(id);
  if (!box) {
    box = el("figure", { id, class: "chart", "data-points": "0" }, el("figcaption", {}, title), el("div", { class: "plot" }));
    container.append(box);
  }
  box.querySelector("figcaption").textContent = title;
  return box;
}

function draw(box, times, lines, unit) {
  const key = JSON.stringify(lines.map(([label]) => label));
  const data = [times, ...lines.map(([, values]) => values)];
  const points = times.length;
  box.setAttribute("data-points", String(points));
  box.setAttribute("data-last", JSON.stringify(lines.map(([, values]) => values[values.length - 1] ?? null)));
  if (box.plot && box.plotKey === key) {
    box.plot.setData(data);
    return;
  }
  if (box.plot) box.plot.destroy();
  const plot = box.querySelector(".plot");
  plot.replaceChildren();
  box.plotKey = key;
  box.plot = new uPlot({
    width: chartWidth(box.parentElement), height: CHART_HEIGHT, padding: [10, 36, 0, 0],
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes: [{ values: clockTicks, space: 90 }, { label: unit, size: 60, values: valueTicks }],
    series: [{}, ...lines.map(([label], index) => ({
      label, stroke: COLOURS[index % COLOURS.length], width: 1.5, spanGaps: false,
      points: { show: points < 40 },
    }))],
    legend: { live: false },
  }, data, plot);
}

function latencyTitle(kind, what) {
  return kind === "p99" ? `${what} latency p99 (ms)` : `${what} latency, mean (ms)`;
}

async function topologyCharts(name, window) {
  const s = await api(`topology/${enc(name)}/series?window=${enc(window)}`);
  const container = document.getElementById("charts");
  const bolts = Object.entries(s.components).filter(([, c]) => c.type === "bolt");
  draw(chart(container, "chart-throughput", "Throughput (tuples/s)"), s.times,
    [["emitted/s", s.topology.emitted], ["acked/s", s.topology.acked]], "tuples/s");
  draw(chart(container, "chart-latency", latencyTitle(s.latencyKind, "Complete")), s.times,
    [[s.latencyKind === "p99" ? "p99" : "mean", s.topology.latency]], "ms");
  draw(chart(container, "chart-capacity", "Capacity per bolt"), s.times,
    bolts.map(([id, c]) => [id, c.capacity]), "capacity");
  const queued = bolts.some(([, c]) => c.queued.some((q) => q !== null));
  if (queued) {
    draw(chart(container, "chart-queued", "Queued tuples per bolt"), s.times,
      bolts.map(([id, c]) => [id, c.queued]), "tuples");
  }
}

async function componentCharts(name, component, window) {
  const s = await api(`topology/${enc(name)}/component/${enc(component)}/series?window=${enc(window)}`);
  const container = document.getElementById("charts");
  draw(chart(container, "chart-throughput", "Throughput (tuples/s)"), s.times,
    [["emitted/s", s.emitted], ["acked/s", s.acked]], "tuples/s");
  draw(chart(container, "chart-latency", latencyTitle(s.latencyKind, s.type === "spout" ? "Complete" : "Execute")),
    s.times, [[s.latencyKind === "p99" ? "p99" : "mean", s.latency]], "ms");
  if (s.type === "bolt") {
    draw(chart(container, "chart-capacity", "Capacity"), s.times, [["capacity", s.capacity]], "capacity");
    if (s.queued.some((q) => q !== null)) {
      draw(chart(container, "chart-queued", "Queued tuples"), s.times, [["queued", s.queued]], "tuples");
    }
  }
}

async function clusterPage(page) {
  const [cluster, summary] = await Promise.all([api("cluster/summary"), api("topology/summary")]);
  page.replaceChildren(
    el("h1", {}, "Cluster"),
    table([["Engine", "engine"], ["Resources", "resources"], ["squall", "squallVersion"],
      ["UI uptime", "uptime"], ["Topologies", "topologies"], ["Workers", "workersTotal"],
      ["Executors", "executorsTotal"], ["Tasks", "tasksTotal"]], [cluster]),
    el("h2", {}, "Topologies"),
    summary.topologies.length === 0 ? el("p", { class: "muted" }, "No topologies running.") :
      table([["Name", "name", (t) => link(`/topology/${enc(t.name)}`, t.name)],
        ["Status", "status", (t) => statusCell(t.status)], ["Uptime", "uptime"],
        ["Workers", "workersTotal"], ["Executors", "executorsTotal"], ["Tasks", "tasksTotal"]],
      summary.topologies, "name"));
}

function controls(name) {
  const wait = el("input", { type: "number", min: "0", value: "0", id: "wait", "aria-label": "wait seconds" });
  const workers = el("input", { type: "number", min: "1", id: "workers", "aria-label": "workers" });
  const notice = el("span", { id: "notice", class: "muted" });
  const act = (label, path, body, klass) => {
    const button = el("button", { type: "button", id: `do-${label.toLowerCase()}`, class: klass }, label);
    button.addEventListener("click", async () => {
      if (label === "Kill" && !confirm(`Kill ${name}?`)) return;
      try {
        await api(`topology/${enc(name)}/${path()}`, {
          method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify(body ? body() : {}),
        });
        notice.textContent = `${label}: done`;
      } catch (error) {
        notice.textContent = `${label}: ${error.message}`;
      }
      refresh();
    });
    return button;
  };
  return el("div", { class: "controls" },
    act("Activate", () => "activate"), act("Deactivate", () => "deactivate"),
    el("label", {}, "wait (s) ", wait),
    el("label", {}, "workers ", workers),
    act("Rebalance", () => `rebalance/${Number(wait.value) || 0}`,
      () => ({ rebalanceOptions: workers.value ? { numWorkers: Number(workers.value) } : {} })),
    act("Kill", () => `kill/${Number(wait.value) || 0}`, null, "danger"), notice);
}

async function topologyPage(page, where, state) {
  const window = windowParam();
  const t = await api(`topology/${enc(where.name)}?window=${enc(window)}`);
  if (!state.built) {
    page.replaceChildren(
      el("h1", {}, "Topology ", el("span", { id: "topology-name" }, t.name), " ", el("span", { id: "topology-status" })),
      controls(t.name), windowPicker(),
      el("div", { id: "summary" }), el("h2", {}, "Topology stats"), el("div", { id: "stats" }),
      el("h2", {}, "Spouts"), el("div", { id: "spouts" }), el("h2", {}, "Bolts"), el("div", { id: "bolts" }),
      el("div", { id: "spark" }),
      el("h2", {}, "Charts"), el("div", { id: "charts", class: "charts" }),
      el("h2", {}, "Graph"), el("div", { id: "graph", class: "graph" }),
      el("h2", {}, "Configuration"), el("div", { id: "configuration" }));
    state.built = true;
  }
  document.getElementById("topology-status").replaceChildren(statusCell(t.status));
  document.getElementById("summary").replaceChildren(table([["Uptime", "uptime"], ["Workers", "workersTotal"],
    ["Executors", "executorsTotal"], ["Tasks", "tasksTotal"], ["Message timeout (s)", "msgTimeout"]], [t]));
  document.getElementById("stats").replaceChildren(table([["Window", "windowPretty"], ["Emitted", "emitted"],
    ["Transferred", "transferred"], ["Complete latency (ms)", "completeLatency"], ["Acked", "acked"],
    ["Failed", "failed"]], t.topologyStats, "window"));
  const component = (field) => (row) => link(`/topology/${enc(t.name)}/component/${enc(row[field])}`, row[field]);
  document.getElementById("spouts").replaceChildren(table([["Id", "spoutId", component("spoutId")],
    ["Executors", "executors"], ["Tasks", "tasks"], ["Emitted", "emitted"], ["Transferred", "transferred"],
    ["Complete latency (ms)", "completeLatency"],
    ["Complete p99 (ms)", "completeP99", p99("completeLatencyPercentiles")], ["Acked", "acked"],
    ["Failed", "failed"], ["Last error", "lastError", errorCell]], t.spouts, "spoutId"));
  document.getElementById("bolts").replaceChildren(table([["Id", "boltId", component("boltId")],
    ["Executors", "executors"], ["Tasks", "tasks"], ["Emitted", "emitted"], ["Transferred", "transferred"],
    ["Capacity", "capacity"], ["Execute latency (ms)", "executeLatency"],
    ["Execute p99 (ms)", "executeP99", p99("executeLatencyPercentiles")], ["Executed", "executed"],
    ["Process latency (ms)", "processLatency"],
    ["Process p99 (ms)", "processP99", p99("processLatencyPercentiles")], ["Acked", "acked"],
    ["Failed", "failed"], ["Last error", "lastError", errorCell]], t.bolts, "boltId"));
  const spark = document.getElementById("spark");
  if (t.spark) {
    spark.replaceChildren(el("h2", {}, "Micro-batches"),
      table([["Batches", "batches"], ["Last batch", "lastBatchId"], ["Last rows", "lastBatchRows"],
        ["Last (ms)", "lastBatchMs"], ["Median (ms)", "medianBatchMs"], ["Rows", "rowsTotal"],
        ["Retries", "retries"]], [t.spark]),
      table([["Batch", "batchId"], ["Rows", "rows"], ["Duration (ms)", "durationMs"],
        ["State commits", "stateCommits"]], t.spark.recent, "batchId"));
  }
  await topologyCharts(t.name, window);
  const graph = await fetch(`/topology/${enc(t.name)}/graph.svg?window=${enc(window)}`, { credentials: "same-origin" });
  if (graph.ok) {
    const svg = new DOMParser().parseFromString(await graph.text(), "image/svg+xml").documentElement;
    document.getElementById("graph").replaceChildren(document.importNode(svg, true));
  }
  document.getElementById("configuration").replaceChildren(table([["Key", "key"], ["Value", "value"]],
    Object.entries(t.configuration).map(([key, value]) => ({ key, value: JSON.stringify(value) }))));
}

async function componentPage(page, where, state) {
  const window = windowParam();
  const c = await api(`topology/${enc(where.name)}/component/${enc(where.component)}?window=${enc(window)}`);
  const perWindow = c.spoutSummary || c.boltStats;
  const windowColumns = c.componentType === "spout"
    ? [["Window", "windowPretty"], ["Emitted", "emitted"], ["Transferred", "transferred"],
      ["Complete latency (ms)", "completeLatency"],
      ["Complete p99 (ms)", "completeP99", p99("completeLatencyPercentiles")],
      ["Acked", "acked"], ["Failed", "failed"]]
    : [["Window", "windowPretty"], ["Emitted", "emitted"], ["Transferred", "transferred"],
      ["Execute latency (ms)", "executeLatency"],
      ["Execute p99 (ms)", "executeP99", p99("executeLatencyPercentiles")], ["Executed", "executed"],
      ["Process latency (ms)", "processLatency"],
      ["Process p99 (ms)", "processP99", p99("processLatencyPercentiles")],
      ["Acked", "acked"], ["Failed", "failed"]];
  if (!state.built) {
    page.replaceChildren(el("div", { id: "component-head" }), el("h2", {}, "Charts"),
      el("div", { id: "charts", class: "charts" }), el("div", { id: "component-body" }));
    state.built = true;
  }
  document.getElementById("component-head").replaceChildren(
    el("h1", {}, `${c.componentType === "spout" ? "Spout" : "Bolt"} `, el("span", { id: "component-id" }, c.id),
      " of ", link(`/topology/${enc(c.name)}`, c.name), " ", statusCell(c.topologyStatus)),
    windowPicker(),
    table([["Executors", "executors"], ["Tasks", "tasks"]], [c]),
    el("h2", {}, "Stats"), table(windowColumns, perWindow, "window"));
  await componentCharts(where.name, where.component, window);
  document.getElementById("component-body").replaceChildren(
    el("h2", {}, "Inputs"), c.inputs.length ? table([["Component", "component"], ["Stream", "stream"],
      ["Grouping", "grouping"]], c.inputs) : el("p", { class: "muted" }, "None."),
    el("h2", {}, "Output streams"), table([["Stream", "stream"], ["Emitted", "emitted"],
      ["Transferred", "transferred"]], c.outputStats, "stream"),
    el("h2", {}, "Tasks"), table([["Id", "id"], ["Emitted", "emitted"], ["Transferred", "transferred"],
      ["Executed", "executed"], ["Acked", "acked"], ["Failed", "failed"]], c.executorStats, "task"),
    el("h2", {}, "Metrics"), el("div", { id: "metrics" }, Object.keys(c.custom).length
      ? table([["Metric", "name"], ["Value", "value"]], Object.keys(c.custom).sort()
        .map((name) => ({ name, value: c.custom[name] })), "name")
      : el("p", { class: "muted" }, "None.")),
    el("h2", {}, "Errors"), c.componentErrors.length ? el("div", {}, ...c.componentErrors.map((e) =>
      el("details", {}, el("summary", { class: "error" }, `${new Date(e.errorTime).toISOString()} task ${e.errorTask}: ${e.error}`),
        el("pre", {}, e.traceback)))) : el("p", { class: "muted" }, "None."));
}

const where = route();
const state = { built: false };

async function refresh() {
  const page = document.getElementById("page");
  crumbs(where);
  try {
    if (where.page === "topology") await topologyPage(page, where, state);
    else if (where.page === "component") await componentPage(page, where, state);
    else await clusterPage(page);
    document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    page.replaceChildren(el("p", { class: "error", id: "page-error" }, error.message), el("p", {}, link("/", "Back to the cluster")));
    state.built = false;
  }
}

async function loop() {
  await refresh();
  setTimeout(loop, REFRESH_MS);
}

loop();
