// Baton dashboard: reads the member's HTTP/JSON API every two seconds and
// renders it. Text goes in with textContent only, never as HTML.
"use strict";

const PAGE = 200; // rows fetched per table
const $ = (sel) => document.querySelector(sel);

let selected = null; // the lock shown in full

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") e.addEventListener("click", v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
  return e;
}

async function get(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
  let body = null;
  try { body = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const msg = body && body.message ? body.message : r.status + " " + r.statusText;
    throw new Error(path.split("?")[0] + ": " + msg);
  }
  return body;
}

// ago formats the time since an RFC 3339 timestamp, as "3m 12s".
function ago(ts) {
  if (!ts) return "";
  const ms = Date.now() - Date.parse(ts);
  if (!(ms >= 0)) return "";
  return span(ms / 1000);
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

function fill(tbody, rows, empty, cols) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: cols, class: "muted" }, empty))]));
}

function renderStatus(st) {
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
    el("td", {}, m.id === st.leader_id ? "leader" : m.learner ? "learner" : ""))), "no members known", 6);
}

// delayedNote says until when a lock is in its lock-delay (granted to no
// one after a holder's session or hold limit expired), or "".
function delayedNote(x) {
  if (!x || !x.delayed_until) return "";
  const s = Math.max(0, Math.ceil((Date.parse(x.delayed_until) - Date.now()) / 1000));
  return "lock-delay: granted to no one until " + new Date(x.delayed_until).toLocaleTimeString() + " (" + s + " s)";
}

function holderCells(h, delayed) {
  if (!h) return [el("td", { class: "muted" }, delayed || "free"), el("td"), el("td"), el("td"), el("td"), el("td")];
  return [el("td", {}, h.session_id), el("td", {}, h.owner), el("td", {}, h.owner_key), el("td", {}, h.token),
    el("td", {}, h.count), el("td", {}, ago(h.since))];
}

// mode says whether a hold or a wait is shared (a semaphore's permit, a
// reader) or exclusive (a mutex, a writer).
function mode(x) {
  return x.shared ? "shared" : "exclusive";
}

function renderLocks(resp) {
  const rows = (resp.locks || []).map((l) => el("tr", { class: l.name === selected ? "selected" : "" },
    el("td", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); select(l.name); } }, l.name)),
    ...holderCells(l.holder, delayedNote(l)), el("td", {}, (l.holders || 0) + " of " + (l.limit || 1)), el("td", {}, l.waiters || 0)));
  fill($("#locks tbody"), rows, "no locks held or awaited" + ($("#prefix").value ? " under this prefix" : ""), 9);
  const more = $("#locks-more");
  more.hidden = !resp.next_page_token;
  more.textContent = "Showing the first " + PAGE + "; narrow the prefix, or use `baton locks PREFIX`.";
}

function renderSessions(resp) {
  const rows = (resp.sessions || []).map((s) => el("tr", { class: s.blacklisted ? "blacklisted" : "" },
    el("td", {}, s.id), el("td", {}, s.owner), el("td", {}, s.ttl), el("td", {}, s.holds),
    el("td", {}, ago(s.created)), el("td", {}, s.blacklisted ? "yes: expires at its TTL" : "")));
  fill($("#sessions tbody"), rows, "no live sessions", 6);
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

function renderDetail(resp) {
  const lock = resp.lock;
  $("#detail-name").textContent = selected;
  fill($("#history tbody"), (resp.history || []).map((p) => el("tr", {},
    el("td", {}, p.session_id), el("td", {}, p.owner), el("td", {}, p.owner_key), el("td", {}, p.token),
    el("td", {}, heldFor(p)), el("td", {}, ago(p.ended)), el("td", {}, howEnded(p.how)))),
  "no hold ended here lately", 7);
  if (!lock) {
    $("#detail-kind").textContent = "";
    fill($("#holders tbody"), [], "free now: nobody holds or waits", 10);
    fill($("#waiters tbody"), [], "", 7);
    return;
  }
  const kind = lock.limit > 1 ? "admits " + lock.limit + " holders" : "a mutex: one holder";
  const delayed = delayedNote(lock);
  $("#detail-kind").textContent = delayed ? kind + "; " + delayed : kind;
  fill($("#holders tbody"), (lock.holders || []).map((h) => el("tr", {}, ...holderCells(h), el("td", {}, mode(h)),
    el("td", {}, h.hold_limit || "none"), el("td", {}, h.lock_delay || "none"), el("td", {}, h.value || ""),
    el("td", {}, h.revoke_deadline ? "ends " + new Date(h.revoke_deadline).toLocaleTimeString() + " unless released" : "no"))),
  delayed || "nobody holds it", 11);
  fill($("#waiters tbody"), (lock.waiters || []).map((w, i) => el("tr", {},
    el("td", {}, i + 1), el("td", {}, w.session_id), el("td", {}, w.owner), el("td", {}, w.owner_key),
    el("td", {}, ago(w.since)), el("td", {}, w.wait_timeout && w.wait_timeout !== "0s" ? w.wait_timeout : "until cancelled"),
    el("td", {}, mode(w)))),
  "nobody waits", 7);
}

function select(name) {
  selected = name;
  $("#detail").hidden = false;
  refresh();
}

async function refresh() {
  const prefix = $("#prefix").value;
  const jobs = [
    get("/v1/status").then(renderStatus),
    get("/v1/locks?page_size=" + PAGE + "&prefix=" + encodeURIComponent(prefix)).then(renderLocks),
    get("/v1/sessions?page_size=" + PAGE).then(renderSessions),
  ];
  if (selected !== null) jobs.push(get("/v1/lock?name=" + encodeURIComponent(selected)).then(renderDetail));
  const errs = (await Promise.allSettled(jobs)).filter((r) => r.status === "rejected").map((r) => r.reason.message);
  const box = $("#error");
  box.hidden = errs.length === 0;
  box.textContent = errs.join("; ");
  $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
}

document.addEventListener("DOMContentLoaded", () => {
  $("#filter").addEventListener("submit", (e) => { e.preventDefault(); refresh(); });
  $("#prefix").addEventListener("input", () => refresh());
  $("#detail-close").addEventListener("click", () => { selected = null; $("#detail").hidden = true; refresh(); });
  refresh();
  setInterval(() => { if ($("#live").checked) refresh(); }, 2000);
});
