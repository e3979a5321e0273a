// Baton dashboard: reads the member's HTTP/JSON API again whenever the
// member's feed (/v1/feed) says the log applied, draws the feed's recent
// grants and waits, and acts through the same API (blacklist, conditional
// release) as the user it shows, after a confirmation. Text goes in with
// textContent only, never as HTML.
"use strict";

const PAGE = 200; // rows fetched per table
const STEP = 10; // seconds per point of the charts (the last point is the last STEP seconds)
const WINDOW = 600; // seconds the charts show
const FEED_SILENCE_MS = 5000; // a feed silent this long is dead (it ticks every second)
const $ = (sel) => document.querySelector(sel);

let selected = null; // the lock shown in full
let may = { blacklist: false, release: false }; // what the feed's hello allows
let role = ""; // this member's role, from /v1/status
let leaderAddr = ""; // the leader's client address, from /v1/status
const rates = new Map(); // second -> {grants, waits, wait_seconds_sum}, the feed's
let ratesThrough = 0; // the last second the feed sent rates for
let connState = "connecting…"; // the feed's state, shown in the header
let lastRead = null; // when the API was last read

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") e.addEventListener("click", v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
  return e;
}

// ---- the API, as the user of the bearer token entered (if any) ----

function token() {
  return sessionStorage.getItem("baton.token") || "";
}

function headers(more) {
  const h = Object.assign({ Accept: "application/json" }, more || {});
  if (token()) h.Authorization = "Bearer " + token();
  return h;
}

async function answer(path, r) {
  let body = null;
  try { body = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const msg = body && body.message ? body.message : r.status + " " + r.statusText;
    throw new Error(path.split("?")[0] + ": " + msg);
  }
  return body;
}

async function get(path) {
  return answer(path, await fetch(path, { headers: headers(), cache: "no-store" }));
}

// post makes a state-changing call. The member refuses one a browser
// sends from another origin (cross-site request forgery); this page is
// the member's own.
async function post(path, body) {
  return answer(path, await fetch(path, {
    method: "POST", headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body), cache: "no-store",
  }));
}

// ---- formatting ----

// ago formats the time since an RFC 3339 timestamp, as "3m 12s".
function ago(ts) {
  if (!ts) return "";
  const ms = Date.now() - Date.parse(ts);
  if (!(ms >= 0)) return "";
  return span(ms / 1000);
}

// agoCell is a cell saying how long ago ts was (then suffix); tick keeps
// it current between reads, which come only when the log applies.
function agoCell(ts, suffix) {
  return el("td", { "data-since": ts || "", "data-suffix": suffix || "" }, ts ? ago(ts) + (suffix || "") : "");
}

function tick() {
  for (const e of document.querySelectorAll("td[data-since]")) {
    if (e.dataset.since) e.textContent = ago(e.dataset.since) + e.dataset.suffix;
  }
}

function span(s) {
  if (s < 1) return Math.round(s * 1000) + " ms";
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + "m " + Math.floor(s % 60) + "s";
  const h = Math.floor(m / 60);
  if (h < 48) return h + "h " + (m % 60) + "m";
  return Math.floor(h / 24) + "d " + (h % 24) + "h";
}

// owner is a hold's or wait's owner label, with its owner key when it
// has one (most holds use the default, empty key).
function owner(x) {
  return x.owner_key ? x.owner + " · key " + x.owner_key : x.owner;
}

// mode says whether a hold or a wait is shared (a semaphore's permit, a
// reader) or exclusive (a mutex, a writer).
function mode(x) {
  return x.shared ? "shared" : "exclusive";
}

// fill puts rows (or a row saying empty) into tbody, unless they show
// what it shows already: a read after every applied batch would
// otherwise replace, under the pointer, the row the user is clicking.
function fill(tbody, rows, empty, cols) {
  if (!rows.length) rows = [el("tr", {}, el("td", { colspan: cols, class: "muted" }, empty))];
  const sig = rows.map(signature).join("\n");
  if (tbody.dataset.sig === sig) return;
  tbody.dataset.sig = sig;
  tbody.replaceChildren(...rows);
}

// signature is what a row shows, with times as their timestamps (tick
// keeps their text current).
function signature(tr) {
  const cells = [...tr.children].map((td) => td.dataset.since !== undefined ? "@" + td.dataset.since : td.textContent);
  return [tr.className, tr.dataset.session || "", ...cells].join("\t");
}

// ---- the views ----

function renderStatus(st) {
  role = st.role;
  leaderAddr = st.leader_addr || "";
  $("#member").textContent = st.name + " (" + st.role + ")";
  const facts = [
    ["leader", st.leader || "none known"],
    ["term", st.term],
    ["commit index", st.commit_index],
    ["applied index", st.applied_index],
    ["sessions", st.sessions],
    ["locks", st.locks],
    ["version", st.version],
    ["log version", st.log_version],
  ];
  $("#cluster").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  fill($("#members tbody"), (st.members || []).map((m) => el("tr", { class: m.id === st.leader_id ? "leader" : "" },
    el("td", {}, m.name), el("td", {}, m.id), el("td", {}, m.client_addr), el("td", {}, m.peer_addr),
    el("td", {}, m.log_version || "-"),
    el("td", {}, m.id === st.leader_id ? "leader" : m.learner ? "learner" : "follower"))), "no members known", 6);
  drawCharts();
}

// delayedNote says until when a lock is in its lock-delay (granted to no
// one after a holder's session or hold limit expired), or "".
function delayedNote(x) {
  if (!x || !x.delayed_until) return "";
  const s = Math.max(0, Math.ceil((Date.parse(x.delayed_until) - Date.now()) / 1000));
  return "lock-delay: granted to no one until " + new Date(x.delayed_until).toLocaleTimeString() + " (" + s + " s)";
}

function holderCells(h, delayed) {
  if (!h) return [el("td", { class: "muted" }, delayed || "free"), el("td"), el("td"), el("td"), el("td")];
  return [el("td", {}, h.session_id), el("td", {}, owner(h)), el("td", {}, h.token),
    el("td", {}, h.count), agoCell(h.since)];
}

function renderLocks(resp) {
  const rows = (resp.locks || []).map((l) => el("tr", { class: l.name === selected ? "selected" : "" },
    el("td", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); select(l.name); } }, l.name)),
    ...holderCells(l.holder, delayedNote(l)), el("td", {}, (l.holders || 0) + " of " + (l.limit || 1)), el("td", {}, l.waiters || 0)));
  fill($("#locks tbody"), rows, "no locks held or awaited" + ($("#prefix").value ? " under this prefix" : ""), 8);
  const more = $("#locks-more");
  more.hidden = !resp.next_page_token;
  more.textContent = "Showing the first " + PAGE + "; narrow the prefix, or use `baton locks PREFIX`.";
}

function renderSessions(resp) {
  const rows = (resp.sessions || []).map((s) => el("tr", { class: s.blacklisted ? "blacklisted" : "" },
    el("td", {}, s.id), el("td", {}, s.owner), el("td", {}, s.ttl), el("td", {}, s.holds),
    agoCell(s.created), el("td", {}, s.blacklisted ? "yes: expires at its TTL" : ""),
    el("td", {}, s.blacklisted ? "" : blacklistButton(s.id, s.owner, s.ttl, ""))));
  fill($("#sessions tbody"), rows, "no live sessions", 7);
  const more = $("#sessions-more");
  more.hidden = !(resp.next_after_id && resp.next_after_id !== "0");
  more.textContent = "Showing the first " + PAGE + "; `baton sessions` lists them all.";
}

// heldFor is how long a past hold lasted, from its since and ended times.
function heldFor(p) {
  const ms = Date.parse(p.ended) - Date.parse(p.since);
  if (!(ms >= 0)) return "";
  return ms < 1000 ? ms + " ms" : ms < 120000 ? (ms / 1000).toFixed(1) + " s" : Math.round(ms / 60000) + " min";
}

// howEnded turns HOLD_END_SESSION_EXPIRED into "session expired".
function howEnded(how) {
  return String(how || "").replace(/^HOLD_END_/, "").replace(/_/g, " ").toLowerCase();
}

// holderRow is one holder of the lock shown in full, with the actions
// the user may take on it.
function holderRow(name, h) {
  return el("tr", { "data-session": h.session_id }, ...holderCells(h), el("td", {}, mode(h)),
    el("td", {}, h.hold_limit || "none"), el("td", {}, h.lock_delay || "none"), el("td", {}, h.value || ""),
    el("td", {}, h.revoke_deadline ? "ends " + new Date(h.revoke_deadline).toLocaleTimeString() + " unless released" : "no"),
    el("td", { class: "act" }, releaseButton(name, h), blacklistButton(h.session_id, h.owner, "", name)));
}

function renderDetail(resp) {
  const lock = resp.lock;
  $("#detail-name").textContent = selected;
  fill($("#history tbody"), (resp.history || []).map((p) => el("tr", {},
    el("td", {}, p.session_id), el("td", {}, owner(p)), el("td", {}, p.token),
    el("td", {}, heldFor(p)), agoCell(p.ended, " ago"), el("td", {}, howEnded(p.how)))),
  "no hold ended here lately", 6);
  if (!lock) {
    $("#detail-kind").textContent = "";
    fill($("#holders tbody"), [], "free now: nobody holds or waits", 11);
    fill($("#waiters tbody"), [], "", 6);
    return;
  }
  const kind = lock.limit > 1 ? "admits " + lock.limit + " holders" : "a mutex: one holder";
  const delayed = delayedNote(lock);
  $("#detail-kind").textContent = delayed ? kind + "; " + delayed : kind;
  fill($("#holders tbody"), (lock.holders || []).map((h) => holderRow(selected, h)), delayed || "nobody holds it", 11);
  fill($("#waiters tbody"), (lock.waiters || []).map((w, i) => el("tr", { "data-session": w.session_id },
    el("td", {}, i + 1), el("td", {}, w.session_id), el("td", {}, owner(w)),
    agoCell(w.since), el("td", {}, w.wait_timeout && w.wait_timeout !== "0s" ? w.wait_timeout : "until cancelled"),
    el("td", {}, mode(w)))),
  "nobody waits", 6);
}

function select(name) {
  selected = name;
  $("#detail").hidden = false;
  refresh();
}

// ---- reading: one refresh at a time, another after it if asked meanwhile ----

let refreshing = null;
let again = false;

function refresh() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = readAll().finally(() => {
    refreshing = null;
    if (again) {
      again = false;
      refresh();
    }
  });
  return refreshing;
}

async function readAll() {
  const prefix = $("#prefix").value;
  const name = selected;
  const jobs = [
    get("/v1/status").then(renderStatus),
    get("/v1/locks?page_size=" + PAGE + "&prefix=" + encodeURIComponent(prefix)).then(renderLocks),
    get("/v1/sessions?page_size=" + PAGE).then(renderSessions),
  ];
  if (name !== null) jobs.push(get("/v1/lock?name=" + encodeURIComponent(name)).then((r) => { if (name === selected) renderDetail(r); }));
  const errs = (await Promise.allSettled(jobs)).filter((r) => r.status === "rejected").map((r) => r.reason.message);
  showError(errs.join("; "));
  lastRead = new Date();
  showConn();
}

function showError(msg) {
  const box = $("#error");
  box.hidden = !msg;
  box.textContent = msg;
}

// notice says how the last action went; it stays until the next one
// (reads clear only their own errors, in #error).
function notice(msg, failed) {
  const box = $("#notice");
  box.hidden = !msg;
  box.className = failed ? "error" : "notice";
  box.textContent = msg;
}

// ---- acting, after a confirmation that names what the page showed ----

// confirmAction opens the confirmation dialog and resolves to whether
// the user confirmed.
function confirmAction(what, note, ok) {
  const dlg = $("#confirm");
  $("#confirm-what").textContent = what;
  $("#confirm-note").textContent = note;
  $("#confirm-ok").textContent = ok;
  dlg.returnValue = "";
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.showModal();
  });
}

// releaseButton offers to release the hold h of lock name only if it is
// still h's: the request names the session and token shown, and the
// member releases nothing if the lock has passed on meanwhile.
function releaseButton(name, h) {
  if (!may.release) return "";
  return el("button", { type: "button", class: "release", onclick: async () => {
    const yes = await confirmAction(
      "Release lock " + name + ", held by session " + h.session_id + " (" + h.owner + ") with token " + h.token + "?",
      "Only this hold ends: if the lock has passed to another holder or token meanwhile, nothing is released. " +
      "The holder is told its hold is lost, and the lock passes to its next waiter.",
      "release this hold");
    if (!yes) return;
    try {
      await post("/v1/locks/cas-release", { name: name, session_id: h.session_id, token: h.token });
      notice("Released " + name + " (session " + h.session_id + ", token " + h.token + ").");
    } catch (e) {
      notice(e.message, true);
    }
    refresh();
  } }, "release…");
}

// blacklistButton offers to blacklist session id (ids are never reused,
// so the request cannot reach another process than the one shown).
function blacklistButton(id, label, ttl, lock) {
  if (!may.blacklist) return "";
  return el("button", { type: "button", class: "blacklist", onclick: async () => {
    const yes = await confirmAction(
      "Blacklist session " + id + " (" + label + ")" + (lock ? ", holder of " + lock : "") + "?",
      "Its heartbeats are refused from now on; it expires at the end of its TTL" + (ttl ? " (" + ttl + ")" : "") +
      ", and its holds then pass to their waiters. This cannot be undone.",
      "blacklist session " + id);
    if (!yes) return;
    try {
      await post("/v1/sessions/" + encodeURIComponent(id) + "/blacklist", {});
      notice("Blacklisted session " + id + ": it expires at the end of its TTL.");
    } catch (e) {
      notice(e.message, true);
    }
    refresh();
  } }, "blacklist…");
}

// ---- the charts: grants per second and mean acquire wait ----

const SVG = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text != null) e.textContent = text;
  return e;
}

// steps sums the recent seconds into STEP-second points over WINDOW,
// oldest first, the last ending with the last second the feed sent:
// grants per second, and the mean wait in ms (null where nothing waited).
function steps() {
  const end = ratesThrough || Math.floor(Date.now() / 1000) - 1;
  const out = [];
  for (let t = end - WINDOW + STEP; t <= end; t += STEP) {
    let grants = 0, waits = 0, sum = 0;
    for (let s = t - STEP + 1; s <= t; s++) {
      const r = rates.get(s);
      if (r) { grants += r.grants; waits += r.waits; sum += r.wait_seconds_sum; }
    }
    out.push({ grants: grants / STEP, wait: waits ? (sum / waits) * 1000 : null });
  }
  return out;
}

function plot(svg, values, unit) {
  const W = 300, H = 56, top = 12;
  const max = Math.max(0, ...values.filter((v) => v != null));
  const y = (v) => top + H - (max > 0 ? (v / max) * H : 0);
  const x = (i) => (values.length > 1 ? (i / (values.length - 1)) * W : 0);
  const kids = [svgEl("line", { x1: 0, y1: top + H, x2: W, y2: top + H, class: "axis" })];
  let run = [];
  const flush = () => {
    if (run.length) kids.push(svgEl("polyline", { points: run.join(" "), class: "line" }));
    run = [];
  };
  values.forEach((v, i) => {
    if (v == null) flush();
    else run.push(x(i).toFixed(1) + "," + y(v).toFixed(1));
  });
  flush();
  kids.push(svgEl("text", { x: 0, y: 9, class: "label" }, "max " + fmtNumber(max) + unit));
  kids.push(svgEl("text", { x: W, y: 9, class: "label end" }, "now"));
  svg.replaceChildren(...kids);
}

function fmtNumber(v) {
  return v >= 100 ? Math.round(v).toString() : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

function drawCharts() {
  const pts = steps();
  plot($("#grants-chart"), pts.map((p) => p.grants), "/s");
  plot($("#wait-chart"), pts.map((p) => p.wait), " ms");
  const last = pts[pts.length - 1];
  $("#grants-now").textContent = last ? fmtNumber(last.grants) + "/s" : "";
  $("#wait-now").textContent = last && last.wait != null ? fmtNumber(last.wait) + " ms" : "";
  const note = $("#wait-note");
  note.hidden = role === "" || role === "leader";
  note.replaceChildren("Acquire waits are timed by the leader, and this member is not it" +
    (leaderAddr ? ": the leader's dashboard is at " + leaderAddr + "/ui/" : "") + ".");
}

function addRates(r) {
  for (const s of r.seconds || []) rates.set(s.second, s);
  ratesThrough = r.through;
  const oldest = ratesThrough - WINDOW - STEP;
  for (const sec of rates.keys()) if (sec < oldest) rates.delete(sec);
  drawCharts();
}

// ---- the feed: a streaming fetch of /v1/feed, connected again when it ends ----

function showConn() {
  $("#conn").textContent = connState + (lastRead ? " · read " + lastRead.toLocaleTimeString() : "");
}

function onEvent(e) {
  if (e.hello) {
    may = { blacklist: e.hello.may_blacklist, release: e.hello.may_release };
    $("#you").textContent = e.hello.you ? "as " + e.hello.you : "";
    refresh();
  } else if (e.rates) {
    addRates(e.rates);
  } else if (e.changed) {
    if ($("#live").checked) refresh();
  } else if (e.error) {
    throw new Error(e.error.message);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// follow reads the feed for as long as the page is open. When it ends
// (the member restarts, knows no leader, or the network fails) it
// connects again, waiting longer after each failure (up to 5 s), and
// reads everything afresh once connected.
async function follow() {
  let delay = 250;
  for (;;) {
    const ctl = new AbortController();
    let silence = null;
    const arm = () => { clearTimeout(silence); silence = setTimeout(() => ctl.abort(), FEED_SILENCE_MS); };
    try {
      arm();
      const r = await fetch("/v1/feed", { headers: headers(), cache: "no-store", signal: ctl.signal });
      if (!r.ok) await answer("/v1/feed", r);
      connState = "live";
      showConn();
      delay = 250;
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) throw new Error("the member ended the feed");
        arm();
        buf += value;
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line) onEvent(JSON.parse(line));
        }
      }
    } catch (e) {
      connState = "reconnecting (" + (ctl.signal.aborted ? "the feed fell silent" : e.message) + ")";
      showConn();
    } finally {
      clearTimeout(silence);
      ctl.abort();
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 5000);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("#filter").addEventListener("submit", (e) => { e.preventDefault(); refresh(); });
  $("#prefix").addEventListener("input", () => refresh());
  $("#detail-close").addEventListener("click", () => { selected = null; $("#detail").hidden = true; refresh(); });
  $("#live").addEventListener("change", () => { if ($("#live").checked) refresh(); });
  $("#signin").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem("baton.token", $("#token").value.trim());
    $("#token").value = "";
    location.reload(); // the feed says anew what this user may do
  });
  setInterval(tick, 1000);
  follow();
});
