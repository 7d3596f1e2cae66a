// The dashboard of one ElasticDL job: polls the master's JSON API every
// second and draws the curves with uPlot. The token came in the page's URL;
// the server answered with a cookie that these requests carry.
"use strict";

const POLL_MS = 1000;
const COLORS = ["#2b5fb3", "#d9822b", "#1f7a44", "#b3261e", "#7a3fb3", "#2b9bb3", "#8a6d1f"];

const state = {
  loss: [],          // [t, version, loss]
  lossNext: 0,
  evaluations: [],   // {t, version, metrics}
  eventsNext: 0,
  xAxis: "version",
  lossPlot: null,
  evalPlot: null,
  evalNames: "",
};

const $ = (id) => document.getElementById(id);

function text(el, value) {
  if (el.textContent !== String(value)) el.textContent = value;
}

function duration(seconds) {
  if (seconds === undefined || seconds === null || !isFinite(seconds)) return "-";
  seconds = Math.round(seconds);
  const h = Math.floor(seconds / 3600), m = Math.floor(seconds / 60) % 60, s = seconds % 60;
  return h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m ${s}s` : `${s}s`;
}

function bytes(n) {
  if (n === undefined || n === null) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  for (; n >= 1024 && i < units.length - 1; i++) n /= 1024;
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function clock(t) {
  return new Date(t * 1000).toLocaleTimeString();
}

async function getJson(path) {
  const response = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function plotWidth(el) {
  return Math.max(el.clientWidth - 4, 300);
}

// A uPlot chart in `el` with the given series names; x is a model version or
// a time (seconds since the epoch). Sparse series (evaluations: often one
// point, at the end of the job) are drawn with their points marked.
function makePlot(el, names, time, sparse = false) {
  el.innerHTML = "";
  const series = [{ label: time ? "time" : "model version" }];
  names.forEach((name, i) => series.push({
    label: name, stroke: COLORS[i % COLORS.length], width: 1.5,
    points: sparse ? { show: true, size: 8 } : { show: false }, spanGaps: true,
  }));
  return new uPlot({
    width: plotWidth(el), height: 250, series,
    scales: { x: { time } },
    axes: [{}, { size: 60 }],
    legend: { live: true },
  }, [[], ...names.map(() => [])], el);
}

function drawLoss() {
  const el = $("loss-chart");
  const time = state.xAxis === "time";
  if (!state.lossPlot || state.lossPlot.time !== time) {
    if (state.lossPlot) state.lossPlot.destroy();
    state.lossPlot = makePlot(el, ["loss"], time);
    state.lossPlot.time = time;
  }
  const points = state.loss.slice().sort((a, b) => (time ? a[0] - b[0] : a[1] - b[1] || a[0] - b[0]));
  state.lossPlot.setData([points.map((p) => (time ? p[0] : p[1])), points.map((p) => p[2])]);
  el.dataset.points = points.length;
}

function drawEvaluations() {
  const el = $("eval-chart");
  const names = [...new Set(state.evaluations.flatMap((e) => Object.keys(e.metrics)))].sort();
  const time = state.xAxis === "time";
  const key = names.join(",") + (time ? "@t" : "@v");
  if (!state.evalPlot || state.evalNames !== key) {
    if (state.evalPlot) state.evalPlot.destroy();
    state.evalPlot = makePlot(el, names.length ? names : ["(no evaluation yet)"], time, true);
    state.evalNames = key;
  }
  const rows = state.evaluations.slice().sort((a, b) => (time ? a.t - b.t : a.version - b.version));
  const data = [rows.map((e) => (time ? e.t : e.version))];
  (names.length ? names : [""]).forEach((name) => data.push(rows.map((e) => e.metrics[name] ?? null)));
  state.evalPlot.setData(data);
  el.dataset.points = rows.length;
}

function fillTable(tbody, rows, key) {
  const seen = new Set();
  rows.forEach((row) => {
    const id = String(row.id);
    seen.add(id);
    let tr = tbody.querySelector(`tr[data-${key}="${id}"]`);
    if (!tr) {
      tr = document.createElement("tr");
      tr.dataset[key] = id;
      tbody.appendChild(tr);
    }
    tr.className = row.state;
    tr.dataset.state = row.state;
    const html = row.cells.map((c) => `<td>${escapeHtml(c)}</td>`).join("");
    if (tr.innerHTML !== html) tr.innerHTML = html;
  });
  tbody.querySelectorAll("tr").forEach((tr) => { if (!seen.has(tr.dataset[key])) tr.remove(); });
}

function escapeHtml(value) {
  return String(value ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

function showJob(job) {
  const s = job.status, summary = job.summary;
  text($("job-name"), job.job);
  document.title = `ElasticDL ${job.job}: ${summary.state}`;
  const badge = $("state");
  text(badge, summary.state);
  badge.className = `badge ${summary.state}`;
  text($("epoch"), s.num_epochs ? `${Math.min(s.epoch + 1, s.num_epochs)} / ${s.num_epochs}` : "-");
  text($("records"), `${(s.records_done ?? 0).toLocaleString()} / ${(s.records_total ?? 0).toLocaleString()}`);
  $("records-bar").style.width = s.records_total ? `${(100 * s.records_done) / s.records_total}%` : "0";
  text($("version"), s.model_version ?? "-");
  text($("throughput"), s.records_per_second ? `${Math.round(s.records_per_second)} rec/s` : "-");
  text($("loss"), s.recent_loss ? s.recent_loss.toFixed(4) : "-");
  text($("elapsed"), duration(summary.elapsed_seconds));
  text($("remaining"), duration(summary.remaining_seconds));
  text($("workers-alive"), s.workers_target !== undefined ? `${s.workers_alive} / ${s.workers_target}` : s.workers_alive ?? "-");
  // The share of the workers' time that trained the model; the rest, by
  // what it went to, in the card's tooltip.
  const time = s.worker_seconds ?? {};
  const goodput = $("goodput");
  text(goodput, time.held > 0 ? `${(100 * s.goodput).toFixed(1)} %` : "-");
  goodput.title = time.held > 0 ? Object.entries(time).filter(([k, v]) => k !== "held" && v > 0)
    .map(([k, v]) => `${k.replace("_", " ")}: ${(100 * v / time.held).toFixed(1)} %`).join("\n") : "";
  const message = $("message");
  message.hidden = !s.message;
  text(message, s.message || "");

  const t = job.tasks;
  const taskRows = ["todo", "doing", "done", "redispatched", "stopped", "failed"]
    .filter((k) => t[k] !== undefined)
    .map((k) => ({ id: k, state: k === "failed" && t[k] > 0 ? "failed" : "", cells: [k, t[k]] }));
  fillTable($("tasks").tBodies[0], taskRows, "task");
  fillTable($("ps").tBodies[0], job.ps.map((p) => ({
    id: p.id, state: p.state,
    cells: [p.id, p.state, p.address ?? "", p.pid, p.restarts, p.version ?? "",
      p.rows !== undefined ? p.rows.toLocaleString() : "", bytes(p.bytes), p.checkpoints ?? ""],
  })), "ps");
  fillTable($("workers").tBodies[0], job.workers.map((w) => ({
    id: w.id, state: w.state,
    cells: [w.id, w.state, w.host, w.pid, w.task ?? "", w.tasks_done,
      w.heartbeat_ms !== undefined ? `${(w.heartbeat_ms / 1000).toFixed(1)} s ago` : "",
      w.how || (w.relaunch ? "replacement" : "")],
  })), "worker");
}

const BAD = new Set(["worker_lost", "ps_lost", "nonfinite", "task_stopped", "straggler"]);
const GOOD = new Set(["worker_started", "ps_registered", "evaluation", "job_finished", "scaled"]);

function describe(e) {
  const skip = new Set(["t", "event", "rpc_seconds"]);
  return Object.entries(e).filter(([k, v]) => !skip.has(k) && v !== "" && v !== false)
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
}

function showEvents(events) {
  const list = $("timeline");
  events.forEach((e) => {
    const li = document.createElement("li");
    li.dataset.event = e.event;
    const cls = BAD.has(e.event) ? "bad" : GOOD.has(e.event) ? "good" : "";
    li.innerHTML = `<span class="when">${clock(e.t)}</span><span class="${cls}">${escapeHtml(e.event)}</span> ${escapeHtml(describe(e))}`;
    list.insertBefore(li, list.firstChild);
  });
}

async function poll() {
  try {
    const [job, curves, events] = await Promise.all([
      getJson("/api/job"),
      getJson(`/api/curves?since=${state.lossNext}`),
      getJson(`/api/events?since=${state.eventsNext}`),
    ]);
    showJob(job);
    // The charts are drawn again only when they have something new.
    if (curves.loss.length > 0 || !state.lossPlot) {
      state.loss.push(...curves.loss);
      drawLoss();
    }
    state.lossNext = curves.next;
    if (curves.evaluations.length !== state.evaluations.length || !state.evalPlot) {
      state.evaluations = curves.evaluations;
      drawEvaluations();
    }
    showEvents(events.events);
    state.eventsNext = events.next;
    text($("connection"), "");
  } catch (err) {
    text($("connection"), `not updating (${err.message}); after the job, run: elasticdl dashboard JOB_DIR`);
  }
  setTimeout(poll, POLL_MS);
}

$("x-axis").addEventListener("change", (e) => {
  state.xAxis = e.target.value;
  drawLoss();
  drawEvaluations();
});
window.addEventListener("resize", () => {
  for (const [plot, id] of [[state.lossPlot, "loss-chart"], [state.evalPlot, "eval-chart"]]) {
    if (plot) plot.setSize({ width: plotWidth($(id)), height: 250 });
  }
});
poll();
