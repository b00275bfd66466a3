"use strict";
// The mock's dashboard. Everything shown is built with textContent: a session id, a header or
// a violation can hold markup, and none of it is ever parsed as HTML.
(() => {
  const MINTED_KEY = "verdict-mock-minted";
  const MAX_ROWS = 300;

  const $ = (id) => document.getElementById(id);

  function api(path, init = {}) {
    // Relative to /_mock/: same origin, no other host is ever asked. When the mock has a control
    // token, the cookie its first visit with ?token= set goes along (the page never sees it).
    return fetch(path, { ...init, cache: "no-store", credentials: "same-origin" });
  }

  async function json(path, init) {
    const response = await api(path, init);
    const text = await response.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
    if (!response.ok) {
      const message = body && body.error && body.error.message ? body.error.message : text;
      throw new Error(`${response.status}: ${message}`.slice(0, 300));
    }
    return body;
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "" : String(text);
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function showProblem(element, error) {
    element.hidden = !error;
    element.textContent = error ? String(error.message || error) : "";
  }

  function fetchUrl(n) {
    return `${location.origin}/e?n=${encodeURIComponent(n)}`;
  }

  function curlLine(n) {
    // Single quotes keep the shell from reading the id; the key stays in the shell's variable.
    const quoted = "'" + fetchUrl(n).replace(/'/g, "'\\''") + "'";
    return `curl -i -H "Authorization: Bearer $VERDICT_API_KEY" ${quoted}`;
  }

  // The journal
  let entries = [];

  function matches(entry) {
    const id = $("filter-id").value.trim();
    const status = $("filter-status").value.trim();
    if (id && !(entry.n || "").includes(id)) return false;
    if (status && !String(entry.status).startsWith(status)) return false;
    return true;
  }

  function renderJournal() {
    const shown = entries.filter(matches).reverse().slice(0, MAX_ROWS);
    const rows = shown.map((entry) => {
      const row = document.createElement("tr");
      const violations = entry.violations || [];
      if (violations.length) row.className = "breach";
      cell(row, new Date(entry.time * 1000).toLocaleTimeString());
      cell(row, entry.method);
      cell(row, entry.status, `status-${String(entry.status)[0]}`);
      cell(row, entry.n, "wrap");
      cell(row, entry.outcome);
      cell(row, entry.latency_ms === null || entry.latency_ms === undefined
        ? "" : Number(entry.latency_ms).toFixed(1));
      cell(row, entry.fault);
      cell(row, violations.join("\n"), "violations");
      cell(row, entry.authorization, "wrap");
      return row;
    });
    $("journal").tBodies[0].replaceChildren(...rows);
    $("count").textContent = `${shown.length} of ${entries.length} shown`;
  }

  async function refreshJournal() {
    entries = await json("requests");
    renderJournal();
  }

  async function refreshHealth() {
    const health = await json("health");
    $("health").textContent =
      `schema ${health.schema} · rate limit ${health.rate_limit} · session lifetime ` +
      `${health.session_lifetime} s · ${health.journal_entries} journal entries`;
    const proxy = health.proxy;
    $("proxy").hidden = !proxy;
    // While proxying, /e answers from the upstream: this mock's sessions are never served.
    $("mint-section").hidden = $("sessions-section").hidden = Boolean(proxy);
    if (proxy) {
      $("proxy").textContent =
        `proxying to ${proxy.upstream}: ${proxy.breaching_answers} of ${proxy.answers} ` +
        `answers broke the contract (${proxy.violations} violations), ` +
        `${proxy.upstream_failures} upstream failures`;
      $("proxy").className = proxy.breaching_answers ? "breaching" : "";
    }
  }

  // Sessions: the named ones from the mock, the minted ones this tab made.
  function minted() {
    try { return JSON.parse(sessionStorage.getItem(MINTED_KEY) || "[]"); } catch (_) { return []; }
  }

  function sessionRow(kind, session) {
    const row = document.createElement("tr");
    cell(row, kind);
    cell(row, session.n, "wrap");
    cell(row, session.verdict);
    cell(row, session.conclusive);
    cell(row, session.expires_at || "never");
    cell(row, JSON.stringify(session.always ? [session.always] : session.script || []), "wrap");
    cell(row, curlLine(session.n), "wrap");
    return row;
  }

  async function refreshSessions() {
    const named = await json("sessions");
    const rows = [
      ...minted().reverse().map((s) => sessionRow("minted", s)),
      ...named.map((s) => sessionRow("named", s)),
    ];
    $("sessions").tBodies[0].replaceChildren(...rows);
  }

  function parseScript(text) {
    // "503, reset, delay 2000" -> [503, "reset", {"delay_ms": 2000}]; the mock checks the rest.
    return text.split(",").map((s) => s.trim()).filter(Boolean).map((step) => {
      const delay = step.match(/^delay[\s:=]*(\d+)$/i);
      if (delay) return { delay_ms: Number(delay[1]) };
      return /^\d+$/.test(step) ? Number(step) : step;
    });
  }

  $("mint").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    const request = { script: parseScript(String(form.get("script") || "")) };
    if (form.get("verdict")) request.verdict = form.get("verdict");
    if (form.get("conclusive")) request.conclusive = form.get("conclusive") === "true";
    if (form.get("age_seconds") !== "") request.age_seconds = Number(form.get("age_seconds"));
    try {
      const session = await json("sessions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(request),
      });
      sessionStorage.setItem(MINTED_KEY, JSON.stringify([...minted(), session].slice(-50)));
      $("minted-id").textContent = session.n;
      $("minted-curl").textContent = curlLine(session.n);
      $("minted-result").hidden = false;
      showProblem($("mint-problem"), null);
      await refreshSessions();
    } catch (error) {
      $("minted-result").hidden = true;
      showProblem($("mint-problem"), error);
    }
  });

  async function act(path, method) {
    try {
      await json(path, { method });
      await tick();
    } catch (error) {
      showProblem($("problem"), error);
    }
  }

  $("reset").addEventListener("click", () => act("reset", "POST"));
  $("clear").addEventListener("click", () => act("requests", "DELETE"));
  $("filter-id").addEventListener("input", renderJournal);
  $("filter-status").addEventListener("input", renderJournal);

  async function tick() {
    try {
      await Promise.all([refreshJournal(), refreshHealth()]);
      showProblem($("problem"), null);
    } catch (error) {
      showProblem($("problem"), error);
    }
  }

  async function loop() {
    if ($("live").checked && !document.hidden) await tick();
    setTimeout(loop, 1000);
  }

  refreshSessions().catch((error) => showProblem($("problem"), error));
  loop();
})();
