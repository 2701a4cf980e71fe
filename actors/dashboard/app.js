// troupe dashboard: the status report from /status, what waits for the operator from /api/approvals,
// live changes from /events (SSE); no polling, but while tasks run (they change without events) and
// for the traffic charts (/api/history, every 10 s while the tab is shown).
"use strict";
(() => {
  const TOKEN_KEY = "troupe-token";
  const MAX_EVENTS = 200;
  const REFRESH_DELAY_MS = 150;  // events come in bursts (state change + restart): one fetch per burst
  const $ = (id) => document.getElementById(id);
  const meta = document.querySelector('meta[name="troupe-event-kinds"]');
  const KINDS = (meta ? meta.content : "").split(",").filter((k) => /^[A-Za-z]+$/.test(k));
  // Events after which what waits for approval may have changed.
  const APPROVAL_EVENTS = new Set(["ApprovalAwaited", "ApprovalDecided", "ToolDefinitionChanged",
    "ServerStateChanged"]);
  const PENDING = "pending-approval", DENIED = "denied", NEEDS_AUTH = "needs-auth";
  const SIGN_IN_POLL_MS = 1000;  // a needs-auth server's sign-in URL follows its state change
  const TASK_POLL_MS = 2000;  // tasks change state without bus events: re-read /status while any is live
  const HISTORY_POLL_MS = 10000;  // /api/history gains one point per server this often
  const SVG = "http://www.w3.org/2000/svg";
  const TASK_STATES = ["working", "input_required", "completed", "failed", "cancelled"];
  const LIVE_TASK_STATES = ["working", "input_required"];

  let status = null;
  let source = null;
  let refreshTimer = null;
  let approvalsWanted = false;
  let fetchSeq = 0, appliedSeq = 0;  // responses may overtake each other: keep only the newest
  let approvalSeq = 0, approvalApplied = 0;
  let taskTimer = null;
  const rows = new Map();
  const seen = new Set();

  const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
  const authHeaders = () => (token() ? { Authorization: "Bearer " + token() } : {});

  // Everything shown comes from servers and upstreams: text nodes only, never innerHTML.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k === "title") node.title = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) if (c != null) node.append(c instanceof Node ? c : String(c));
    return node;
  }

  function ago(ts) {
    if (!ts) return "";
    const s = Math.max(0, Math.round(Date.now() / 1000 - ts));
    if (s < 120) return s + "s";
    if (s < 7200) return Math.floor(s / 60) + "m";
    return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  }

  const clock = (ts) => new Date(ts * 1000).toLocaleTimeString([], { hour12: false });

  // `from` names who raised it: a good /status clears its own complaint, not a failed action's.
  function notice(text, bad, from) {
    const n = $("notice");
    n.dataset.from = from || "";
    n.textContent = text || "";
    n.className = "notice" + (bad ? " bad" : "");
    n.hidden = !text;
  }

  // ------------------------------------------------------------------ status

  async function refresh() {
    const seq = ++fetchSeq;
    let resp;
    try {
      resp = await fetch("/status", { headers: authHeaders(), cache: "no-store" });
    } catch (err) {
      notice("troupe is not answering: " + err.message, true, "status");
      return false;
    }
    if (resp.status === 401) {
      askToken(token() ? "that token was refused" : "");
      return false;
    }
    if (!resp.ok) {
      notice("/status answered " + resp.status, true, "status");
      return false;
    }
    const report = await resp.json();
    if (seq < appliedSeq) return true;
    appliedSeq = seq;
    keepNewerStates(report);
    status = report;
    if ($("notice").dataset.from === "status") notice("");
    render();
    return true;
  }

  // A report fetched just before a state change arrives as an event must not put the older
  // state back: per server, the newer `since` wins (events and reports share troupe's clock).
  function keepNewerStates(report) {
    if (!status) return;
    const shown = new Map(status.servers.map((s) => [s.name, s]));
    for (const s of report.servers) {
      const mine = shown.get(s.name);
      if (!mine || !(mine.since > s.since)) continue;
      if (mine.state !== s.state) s.pid = null;
      s.state = mine.state;
      s.since = mine.since;
      s.last_error = mine.last_error;
    }
  }

  // `approvals`: the waiting list may have changed too (it is fetched with the same burst delay).
  function scheduleRefresh(approvals) {
    if (approvals) approvalsWanted = true;
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      refresh();
      if (approvalsWanted) { approvalsWanted = false; refreshApprovals(); }
    }, REFRESH_DELAY_MS);
  }

  function render() {
    renderHeader();
    renderServers();
    renderTasks();
    renderDiscovery();
  }

  function renderHeader() {
    const ready = $("ready");
    ready.textContent = status.ready ? "ready" : "starting";
    ready.className = "badge " + (status.ready ? "ready" : "starting");
    const bits = ["v" + (status.version || "?"), status.mode + " mode",
      "up " + ago(status.started_at || (Date.now() / 1000 - (status.uptime_s || 0)))];
    if (status.url) bits.push(status.url);
    const mem = status.memory;  // troupe and every process it started, resident now
    if (mem && mem.total_rss_bytes != null) bits.push(fmtMiB(mem.total_rss_bytes) + " RSS in all");
    $("summary").textContent = bits.join(" · ");
    const byState = {};
    for (const s of status.servers) byState[s.state] = (byState[s.state] || 0) + 1;
    const parts = Object.entries(byState).map(([k, n]) => n + " " + k);
    $("counts").textContent = status.servers.length + " servers" + (parts.length ? " · " + parts.join(" · ") : "");
  }

  function renderServers() {
    const body = $("servers");
    const names = new Set(status.servers.map((s) => s.name));
    for (const [name, tr] of rows) if (!names.has(name)) { tr.remove(); rows.delete(name); }
    const empty = body.querySelector("tr.empty");
    if (status.servers.length === 0) {
      if (!empty) body.append(el("tr", { class: "empty" }, el("td", { colspan: "11" }, "no servers configured")));
      return;
    }
    if (empty) empty.remove();
    for (const s of status.servers) {
      let tr = rows.get(s.name);
      if (!tr) {
        tr = el("tr");
        tr.dataset.server = s.name;
        tr.addEventListener("animationend", () => tr.classList.remove("changed"));
        rows.set(s.name, tr);
      }
      body.append(tr);  // appending an existing row moves it: rows follow the report's order
      fillRow(tr, s);
    }
  }

  function fillRow(tr, s) {
    const changed = tr.dataset.state && tr.dataset.state !== s.state;
    tr.dataset.state = s.state;
    tr.dataset.since = s.since || "";
    const lat = s.latency_ms || {};
    const where = s.pid ? "pid " + s.pid : (s.url || launchLine(s.launch) || "–");
    const errors = (s.errors || 0) + (s.timeouts ? " / " + s.timeouts + " t/o" : "");
    tr.replaceChildren(
      el("td", {}, el("strong", {}, s.name), provenanceBadge(s.provenance),
        el("span", { class: "sub" }, s.source || "")),
      el("td", {}, el("span", { class: "badge " + s.state }, s.state),
        el("span", { class: "sub since" }, ago(s.since) + " ago")),
      el("td", {}, s.transport),
      el("td", { class: "where", title: where }, where, el("span", { class: "sub" }, runningCost(s))),
      el("td", { class: "num", title: "tools / resources / prompts" },
        s.tools, el("span", { class: "sub" }, (s.resources || 0) + " / " + (s.prompts || 0))),
      el("td", { class: "num" }, s.in_flight || 0),
      el("td", { class: "num" }, s.calls || 0, el("span", { class: "sub" }, errors + " err")),
      el("td", { class: "num" }, s.restarts || 0),
      el("td", { class: "num" }, lat.p50 == null ? "–" : fmtMs(lat.p50),
        el("span", { class: "sub" }, lat.p99 == null ? "" : "p99 " + fmtMs(lat.p99))),
      el("td", { class: "err", title: s.last_error || "" }, s.last_error || ""),
      el("td", { class: "actions" }, ...actionsFor(s)),
    );
    if (changed) { tr.classList.remove("changed"); void tr.offsetWidth; tr.classList.add("changed"); }
  }

  // What a server costs while it runs (its processes' RSS), and for one on demand how often it woke.
  function runningCost(s) {
    const bits = [];
    if (s.rss_bytes != null) bits.push(fmtMiB(s.rss_bytes) + " RSS");
    if (s.start === "on_demand") bits.push("on demand · " + (s.wakes || 0) + " wakes"
      + (s.last_wake ? ", last " + ago(s.last_wake) + " ago" : ""));
    return bits.join(" · ");
  }

  const fmtMiB = (bytes) => (bytes / 1048576).toFixed(1) + " MiB";

  // Launch facts never hold env or header values; the interpreter's full path is noise here.
  const launchLine = (l) => (l && l.command ? [l.command.split("/").pop(), ...(l.args || [])].join(" ") : "");

  const fmtSeconds = (v) => (v < 1 ? Math.round(v * 1000) + " ms" : v.toFixed(1) + " s");

  const fmtMs = (v) => (v >= 100 ? Math.round(v) : v.toFixed(v >= 10 ? 1 : 2));

  // Provenance is one of troupe's own words; anything else still shows, as text, unstyled.
  function provenanceBadge(p) {
    if (!p) return null;
    const known = /^[a-z]+$/.test(p) ? " prov-" + p : "";
    return el("span", { class: "prov" + known, title: "provenance: where this server came from" }, p);
  }

  function actionsFor(s) {
    const out = [];
    // Restart/start are refused for these by the supervisor: only an operator's decision moves them.
    if (s.state === PENDING) {
      out.push(decisionButton("Approve", s.name, "approve"), decisionButton("Deny", s.name, "deny"));
    } else if (s.state === DENIED) {
      out.push(decisionButton("Approve", s.name, "approve"));
    } else if (s.state === NEEDS_AUTH) {
      // The link goes to the server's own authorization server; only http(s) links are made links.
      if (s.auth_url && /^https?:\/\//i.test(s.auth_url)) {
        out.push(el("a", { href: s.auth_url, target: "_blank", rel: "noopener noreferrer", class: "signin",
          "data-action": "sign-in", title: "sign troupe in to " + s.name }, "Sign in"));
      } else if (!s.auth_error) {
        setTimeout(() => scheduleRefresh(false), SIGN_IN_POLL_MS);  // the URL is being prepared
      }
      out.push(button("Restart", s.name, "restart"));
    } else if (s.enabled === false) {
      out.push(button("Enable", s.name, "enable"));
    } else {
      out.push(button("Restart", s.name, "restart"));
      out.push(button("Disable", s.name, "disable"));
    }
    return out;
  }

  function button(label, name, action) {
    const b = el("button", { type: "button", "data-action": action }, label);
    b.addEventListener("click", () => control([b], "/api/servers/", name, action));
    return b;
  }

  // An operator's decision: the same routes (and token) as `troupe approve|deny NAME`.
  function decisionButton(label, name, action, group) {
    const b = el("button", { type: "button", "data-action": action, class: "decide " + action }, label);
    b.addEventListener("click", () => control(group ? [...group.querySelectorAll("button")] : [b],
      "/api/approvals/", name, action));
    return b;
  }

  async function control(buttons, prefix, name, action) {
    for (const b of buttons) b.disabled = true;
    try {
      const resp = await fetch(prefix + encodeURIComponent(name) + "/" + action,
        { method: "POST", headers: authHeaders() });
      if (resp.status === 401) { askToken("that token was refused"); return; }
      const body = await resp.json().catch(() => ({}));
      if (!resp.ok) notice(action + " " + name + ": " + (body.error || resp.status), true);
      else notice("");
    } catch (err) {
      notice(action + " " + name + ": " + err.message, true);
    } finally {
      for (const b of buttons) b.disabled = false;
      scheduleRefresh(true);
    }
  }

  // ------------------------------------------------------------------ approvals

  async function refreshApprovals() {
    const seq = ++approvalSeq;
    let resp;
    try {
      resp = await fetch("/api/approvals", { headers: authHeaders(), cache: "no-store" });
    } catch (_) {
      return;  // /status reports an unreachable troupe already
    }
    if (resp.status === 401) { askToken(token() ? "that token was refused" : ""); return; }
    if (resp.status === 404) { renderApprovals([]); return; }  // a troupe without the trust routes
    if (!resp.ok) { notice("/api/approvals answered " + resp.status, true, "approvals"); return; }
    const body = await resp.json().catch(() => null);
    if (seq < approvalApplied || !body) return;
    approvalApplied = seq;
    if ($("notice").dataset.from === "approvals") notice("");
    renderApprovals(Array.isArray(body.approvals) ? body.approvals : []);
  }

  // One card per server: its launch line if it waits itself, and every withheld tool or prompt.
  function renderApprovals(list) {
    const panel = $("approvals");
    const cards = new Map();
    for (const r of list) {
      if (!r || typeof r.name !== "string") continue;
      if (!cards.has(r.name)) cards.set(r.name, { server: null, items: [], provenance: r.provenance });
      const card = cards.get(r.name);
      if (r.what === "server") card.server = r;
      else card.items.push(r);
    }
    const box = $("approval-cards");
    box.replaceChildren(...[...cards].map(([name, c]) => approvalCard(name, c)));
    panel.hidden = cards.size === 0;
    const servers = [...cards.values()].filter((c) => c.server).length;
    const items = [...cards.values()].reduce((n, c) => n + c.items.length, 0);
    const bits = [];
    if (servers) bits.push(servers + (servers === 1 ? " server" : " servers"));
    if (items) bits.push(items + (items === 1 ? " changed definition" : " changed definitions"));
    $("approval-count").textContent = bits.join(" · ");
  }

  function approvalCard(name, c) {
    const card = el("div", { class: "card" + (c.server ? " server" : " items") });
    card.dataset.server = name;
    const head = el("div", { class: "card-head" }, el("strong", { class: "name" }, name),
      provenanceBadge(c.provenance),
      el("span", { class: "muted" }, c.server ? "server waits to be run" : "changed definitions withheld"));
    card.append(head);
    if (c.server) {
      const dl = el("dl");
      dl.append(el("dt", {}, "From"), el("dd", { class: "file" }, c.server.file || "–"));
      const l = c.server.launch;  // the redacted line; launch facts (an object) only from an older troupe
      dl.append(el("dt", {}, "Runs"), el("dd", {}, el("pre", { class: "launch" },
        (typeof l === "string" ? l : launchLine(l)) || "–")));
      card.append(dl);
    }
    if (c.items.length) {
      const ul = el("ul", { class: "items" });
      for (const r of c.items) {
        const li = el("li", {}, el("span", { class: "what" }, r.what || "item"), " ",
          el("strong", { class: "item" }, r.item || ""), " ",
          el("span", { class: "change " + (r.change === "new" ? "new" : "changed") }, r.change || "changed"));
        li.dataset.item = r.item || "";
        if (r.diff) li.append(diffBlock(r.diff));
        ul.append(li);
      }
      card.append(ul);
    }
    const actions = el("div", { class: "card-actions" });
    actions.append(decisionButton(c.server ? "Approve" : "Approve " + (c.items.length === 1 ? "the change"
      : "all " + c.items.length + " changes"), name, "approve", actions));
    if (c.server) actions.append(decisionButton("Deny", name, "deny", actions));
    card.append(actions);
    return card;
  }

  // A unified diff, line by line, each a text node inside a span: never parsed as markup.
  function diffBlock(diff) {
    const pre = el("pre", { class: "diff" });
    for (const line of String(diff).split("\n")) {
      const cls = line.startsWith("+++") || line.startsWith("---") ? "file"
        : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
      pre.append(el("span", cls ? { class: cls } : {}, line + "\n"));
    }
    return pre;
  }

  // Tasks held now by state, minted by troupe vs relayed from servers; shown once the report has a
  // tasks section (the keeper answered).
  function renderTasks() {
    const t = status.tasks;
    const panel = $("tasks-panel");
    if (!t || typeof t !== "object" || Object.keys(t).length === 0) { panel.hidden = true; return; }
    panel.hidden = false;
    if (t.error) {
      $("task-summary").textContent = "";
      $("tasks").replaceChildren(el("span", { class: "error" }, "the task keeper is not answering: " + t.error));
      return;
    }
    const byState = t.by_state || {};
    const counts = el("ul", { class: "task-counts" });
    for (const state of TASK_STATES) {
      const li = el("li", { class: "task-state " + state }, el("span", { class: "n" }, byState[state] || 0),
        el("span", { class: "label" }, state.replace("_", " ")));
      li.dataset.state = state;
      counts.append(li);
    }
    const held = t.held || {}, created = t.created || {};
    const dl = el("dl");
    const row = (key, k, v) => { const dd = el("dd", {}, v); dd.dataset.key = key; dl.append(el("dt", {}, k), dd); };
    row("held", "Held", (held.minted || 0) + " minted · " + (held.relayed || 0) + " relayed");
    row("created", "Created", (created.minted || 0) + " minted · " + (created.relayed || 0) + " relayed since start");
    row("cap", "Per client", "at most " + (t.max_per_client ?? "?") + " live · " + (t.refused_at_cap || 0)
      + " refused at the cap");
    row("bytes", "Results kept", fmtBytes(t.result_bytes || 0)
      + (t.dropped_for_bytes ? " · " + t.dropped_for_bytes + " dropped for room" : ""));
    $("tasks").replaceChildren(counts, dl);
    const live = LIVE_TASK_STATES.reduce((n, s) => n + (byState[s] || 0), 0);
    $("task-summary").textContent = live + " live · " + (t.live_by_client || 0) + " clients";
    if (live && !taskTimer) {
      taskTimer = setTimeout(() => { taskTimer = null; scheduleRefresh(false); }, TASK_POLL_MS);
    }
  }

  // ------------------------------------------------------------------ traffic (/api/history)

  async function refreshHistory() {
    let resp;
    try {
      resp = await fetch("/api/history", { headers: authHeaders(), cache: "no-store" });
    } catch (err) {
      return;  // /status's own notice says troupe is not answering
    }
    if (!resp.ok) return;
    renderHistory(await resp.json());
  }

  function svgNode(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    return node;
  }

  // One server's points ([at, calls/s, errors/s, p50 ms, p95 ms]) as a 15-minute chart: calls/s
  // and errors/s filled from the bottom, p50 and p95 as lines on their own scale.
  function chart(name, points, windowS, now) {
    const W = 300, H = 60;
    const x = (at) => Math.max(0, W - ((now - at) / windowS) * W);
    const peak = Math.max(...points.map((p) => p[1]), 0.001);
    const slow = Math.max(...points.map((p) => p[4] || p[3] || 0), 0.001);
    const area = (i) => "M" + x(points[0][0]) + "," + H + points.map((p) => " L" + x(p[0]) + "," +
      (H - (p[i] / peak) * (H - 4))).join("") + " L" + x(points[points.length - 1][0]) + "," + H + " Z";
    const line = (i) => points.filter((p) => p[i] != null).map((p, k) => (k ? " L" : "M") + x(p[0]) + "," +
      (H - (p[i] / slow) * (H - 4))).join("");
    const svg = svgNode("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", role: "img" });
    svg.append(svgNode("path", { class: "calls", d: area(1) }), svgNode("path", { class: "errors", d: area(2) }),
      svgNode("path", { class: "p50", d: line(3) }), svgNode("path", { class: "p95", d: line(4) }));
    const last = points[points.length - 1];
    const figures = peak < 0.01 ? "idle" : rate(last[1]) + " calls/s now · p50 " + ms(last[3]) + " · p95 " +
      ms(last[4]) + " · peak " + rate(peak) + "/s" + (last[2] ? " · " + rate(last[2]) + " errors/s" : "");
    const box = el("div", { class: "chart" }, el("span", { class: "name" }, name), " ",
      el("span", { class: "figures" }, figures), svg);
    box.dataset.server = name;
    return box;
  }

  const rate = (r) => (r >= 10 ? String(Math.round(r)) : r >= 0.1 ? r.toFixed(1) : r.toFixed(2));
  const ms = (v) => (v == null ? "–" : v >= 100 ? Math.round(v) + " ms" : v.toFixed(1) + " ms");

  function renderHistory(h) {
    const servers = h.servers || {};
    const now = Date.now() / 1000;
    const charts = Object.entries(servers).filter(([, points]) => points.length)
      .map(([name, points]) => chart(name, points, h.window_s || 900, now));
    $("traffic").replaceChildren(...(charts.length ? charts : [el("span", { class: "muted" }, "no calls yet")]));
    const failures = (h.failures || []).map((f) => {
      const tr = el("tr", {}, el("td", {}, clock(f.at)), el("td", {}, f.client || "anonymous"), el("td", {}, f.server),
        el("td", { class: "where" }, f.name), el("td", { class: "outcome" }, f.outcome + (f.code != null ? " " + f.code : "")),
        el("td", { class: "err", title: f.message || "" }, (f.retry_after_s != null ? "retry after " + f.retry_after_s
          + "s · " : "") + (f.message || "")));
      tr.dataset.outcome = f.outcome;
      return tr;
    });
    $("failures").replaceChildren(...(failures.length ? failures
      : [el("tr", { class: "empty" }, el("td", { colspan: "6" }, "none"))]));
  }

  const fmtBytes = (n) => (n < 1024 ? n + " B" : n < 1048576 ? (n / 1024).toFixed(1) + " KiB"
    : (n / 1048576).toFixed(1) + " MiB");

  function renderDiscovery() {
    const box = $("discovery");
    const d = status.discovery;
    if (d == null) {
      box.replaceChildren("Discovery is off (", el("code", {}, "--discovery"), " or ",
        el("code", {}, "discovery.enabled: true"), " turns it on).");
      box.className = "muted";
      return;
    }
    box.className = "";
    if (d.error && Object.keys(d).length === 1) {
      box.replaceChildren(el("span", { class: "error" }, "discovery is not answering: " + d.error));
      return;
    }
    const health = d.health || {};
    const dl = el("dl");
    const row = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, v));
    row("State", d.running ? "running a cycle" : (d.enabled === false ? "disabled" : "idle"));
    row("Cycles", d.cycles ?? 0);
    row("Last run", d.last_run_at ? ago(d.last_run_at) + " ago" + (d.duration_s != null ? " (took " + fmtSeconds(d.duration_s) + ")" : "") : "never");
    row("Services", (d.services ?? 0) + " found, " + (d.registered ?? 0) + " registered");
    row("Health", (health.healthy ?? 0) + " healthy · " + (health.unhealthy ?? 0) + " unhealthy · "
      + (health.unknown ?? 0) + " unknown");
    if (d.store) row("Store", d.store);
    if (d.watching != null) row("Watching", d.watching + " files");
    const list = el("ul", { class: "providers" });
    for (const [name, p] of Object.entries(d.providers || {})) {
      const errs = (p && p.errors) || [];
      list.append(el("li", {}, el("strong", {}, name), ": " + ((p && p.count) || 0) + " found",
        errs.length ? el("span", { class: "error" }, " · " + errs.join("; ")) : null));
    }
    box.replaceChildren(dl, el("h2", {}, "Sources"), list.children.length ? list : el("div", { class: "muted" }, "none yet"));
    if (status.health) box.append(el("h2", {}, "Health"), el("pre", {}, JSON.stringify(status.health, null, 1)));
  }

  // ------------------------------------------------------------------ events

  function describe(e) {
    const who = e.server || e.service || "";
    switch (e.type) {
      case "ServerStateChanged": return [who, e.old + " → " + e.new + (e.reason ? " (" + e.reason + ")" : "")];
      case "ServerConnected": return [who, "connected, " + e.tools + " tools"];
      case "ServerDisconnected": return [who, "disconnected: " + e.reason];
      case "ServerRestarted": return [who, "restart #" + e.restarts + " in " + e.backoff_s + " s"];
      case "ServerIdled": return [who, e.learned ? "lists learned; stopped until first use"
        : "stopped after " + Math.round(e.idle_s) + " s idle; its lists stay served"];
      case "ServerWoken": return [who, "woken by " + (e.method || "a call") + " (wake #" + e.wakes + ")"];
      case "CircuitOpened": return [who, "circuit open after " + e.failures + " failures: " + e.reason];
      case "ToolsChanged": return ["", (e.lists || []).join(", ") + " changed (v" + e.version + ")"];
      case "HealthChanged": return [who, (e.healthy ? "healthy" : "unhealthy") + (e.reason ? ": " + e.reason : "")];
      case "ApprovalAwaited": return [who, e.provenance + " server waits for approval" + (e.file ? " (" + e.file + ")" : "")];
      case "ApprovalDecided": return [who, e.decision + " by the operator"];
      case "ToolDefinitionChanged": return [who, (e.listing || "").replace(/s$/, "") + " " + e.item + " " + e.change
        + ", withheld until approved"];
      case "ConfigReloaded": return ["", ["added", "changed", "removed"]
        .map((k) => k + ": " + ((e[k] || []).join(", ") || "–")).join(" · ")];
      default: {
        const rest = Object.entries(e).filter(([k]) => !["type", "at", "server", "service"].includes(k))
          .map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v));
        return [who, rest.join(" ")];
      }
    }
  }

  function tone(e) {
    if (e.type === "ServerDisconnected" || e.type === "CircuitOpened") return "bad";
    if (e.type === "HealthChanged") return e.healthy ? "good" : "bad";
    if (e.type === "ServerStateChanged") return e.new === "ready" ? "good" : (["failed", "backoff"].includes(e.new) ? "bad" : "");
    if (e.type === "ApprovalAwaited" || e.type === "ToolDefinitionChanged") return "wait";
    if (e.type === "ApprovalDecided") return e.decision === "approved" ? "good" : "bad";
    return e.type === "ServerConnected" ? "good" : "";
  }

  function addEvent(e) {
    // /events replays recent history on every (re)connect: show each event once.
    const key = [e.type, e.at, e.server || e.service || "", e.new || "", e.item || ""].join("|");
    if (seen.has(key)) return false;
    seen.add(key);
    const [who, detail] = describe(e);
    const li = el("li", { class: tone(e) }, el("span", { class: "t" }, clock(e.at || Date.now() / 1000)),
      el("span", { class: "k" }, e.type), el("span", { class: "d", title: detail }, who ? who + ": " : "", detail));
    const list = $("events");
    list.prepend(li);
    while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
    if (seen.size > MAX_EVENTS * 5) seen.clear();  // bounded; replays older than the list are harmless
    $("event-count").textContent = list.children.length >= MAX_EVENTS ? "(latest " + MAX_EVENTS + ")" : "";
    return true;
  }

  function onEvent(msg) {
    let e;
    try { e = JSON.parse(msg.data); } catch (_) { return; }
    if (!addEvent(e)) return;
    const approvals = APPROVAL_EVENTS.has(e.type);
    // Show a state change at once (the full report follows), so short states are never missed.
    if (e.type === "ServerStateChanged" && status) {
      const s = status.servers.find((x) => x.name === e.server);
      if (s) { s.state = e.new; s.since = e.at; s.last_error = ["failed", "backoff", "degraded"].includes(e.new) ? e.reason : null;
        renderHeader(); renderServers(); }
    }
    scheduleRefresh(approvals);
  }

  function connect() {
    if (source) source.close();
    const url = "/events" + (token() ? "?access_token=" + encodeURIComponent(token()) : "");
    source = new EventSource(url);
    for (const kind of KINDS) source.addEventListener(kind, onEvent);
    source.onmessage = onEvent;
    source.onopen = () => { setLive("live", "on"); refresh(); refreshApprovals(); };
    source.onerror = () => {
      setLive("reconnecting…", "off");
      // The browser retries by itself unless the stream was refused (CLOSED): then we retry.
      if (source.readyState === EventSource.CLOSED) setTimeout(start, 3000);
    };
  }

  function setLive(text, cls) {
    const live = $("live");
    live.textContent = text;
    live.className = "live " + cls;
  }

  // ------------------------------------------------------------------ auth and start

  function askToken(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    if (source) { source.close(); source = null; }
    setLive("locked", "off");
    $("auth").hidden = false;
    $("auth-error").textContent = message || "";
    $("token").focus();
  }

  $("auth").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    $("token").value = "";
    $("auth").hidden = true;
    start();
  });

  let historyTimer = null;
  async function start() {
    if (await refresh()) {
      refreshApprovals();
      connect();
      refreshHistory();
      if (!historyTimer) historyTimer = setInterval(() => { if (!document.hidden) refreshHistory(); }, HISTORY_POLL_MS);
    }
  }

  // Relative times ("12s ago") tick locally; nothing here asks the server.
  setInterval(() => {
    if (!status) return;
    renderHeader();
    for (const tr of rows.values()) {
      const since = tr.querySelector(".since");
      if (since && tr.dataset.since) since.textContent = ago(Number(tr.dataset.since)) + " ago";
    }
  }, 1000);

  // Call counters change without events: catch up whenever the operator comes back to the tab.
  document.addEventListener("visibilitychange", () => { if (!document.hidden && status) scheduleRefresh(true); });

  start();
})();
