"use strict";
// The mock's dashboard. Everything shown is built with textContent: a session id, a header or
// a violation can hold markup, and none of it is ever parsed as HTML.
(() => {
  const MINTED_KEY = "verdict-mock-minted";
  const MAX_ROWS = 300;
  const LONG_ID = 28; // longer ids show their ends, the whole id on hover and in the copy button
  const SHORT_STATUSES = [{{statuses}}]; // the script statuses sent as a bare number
  let defaultKey = null; // the mock's public default key, when it accepts it (from health)
  let keyKnown = false;
  let polls = 0;

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

  // One clock: local time on screen, the UTC instant on hover.
  function timeCell(row, date, withDay) {
    if (!date) return cell(row, "never");
    const shown = withDay ? date.toLocaleString() : date.toLocaleTimeString();
    const td = cell(row, shown);
    td.title = `${date.toISOString()} (UTC)`;
    return td;
  }

  async function copy(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    const area = document.createElement("textarea"); // a page served over plain http elsewhere
    area.value = text;
    document.body.appendChild(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    if (!done) throw new Error("the browser refused to copy");
  }

  function copyButton(text, label) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.textContent = label;
    button.title = text;
    button.dataset.copy = text;
    button.addEventListener("click", async () => {
      try {
        await copy(text);
        button.textContent = "copied";
      } catch (error) {
        button.textContent = "copy failed";
      }
      setTimeout(() => { button.textContent = label; }, 1500);
    });
    return button;
  }

  // A session id: in full when short; else its ends, the whole id on hover, and a copy button.
  function idCell(row, id) {
    const td = cell(row, "", "id");
    const text = id === null || id === undefined ? "" : String(id);
    td.dataset.id = text;
    const span = document.createElement("span");
    span.className = "id-text";
    span.textContent = text.length > LONG_ID ? `${text.slice(0, 12)}…${text.slice(-8)}` : text;
    if (text.length > LONG_ID) span.title = text;
    td.appendChild(span);
    if (text.length > LONG_ID) td.appendChild(copyButton(text, "copy"));
    return td;
  }

  function showProblem(element, error) {
    element.hidden = !error;
    element.textContent = error ? String(error.message || error) : "";
  }

  function fetchUrl(n) {
    return `${location.origin}/e?n=${encodeURIComponent(n)}`;
  }

  function quoted(text) {
    return "'" + text.replace(/'/g, "'\\''") + "'";
  }

  function curlLine(n) {
    // Single quotes keep the shell from reading the id. The public default key is printed as
    // is; any other key stays in the shell's variable (the note under "Sessions" says so).
    const header = defaultKey
      ? quoted(`Authorization: Bearer ${defaultKey}`)
      : '"Authorization: Bearer $VERDICT_API_KEY"';
    return `curl -i -H ${header} ${quoted(fetchUrl(n))}`;
  }

  // The journal: redrawn only when it changed (or a filter did), so a selection stays put.
  let entries = [];
  let journalText = null;

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
      timeCell(row, new Date(entry.time * 1000), false);
      cell(row, entry.method);
      if (entry.status === null || entry.status === undefined) {
        cell(row, "—", "status-none").title = "no answer: the client got no status line";
      } else {
        cell(row, entry.status, `status-${String(entry.status)[0]}`);
      }
      idCell(row, entry.n);
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
    const next = await json("requests");
    const text = JSON.stringify(next);
    if (text === journalText) return; // no new traffic: leave the table (and any selection) be
    journalText = text;
    entries = next;
    renderJournal();
  }

  // Coverage: the behaviour ids of pytest --verdict-coverage, as this mock's journal met them.
  let coverageText = null;

  async function refreshCoverage() {
    const coverage = await json("coverage");
    const text = JSON.stringify(coverage);
    if (text === coverageText) return;
    coverageText = text;
    const ids = Object.keys(coverage.behaviours);
    const rows = ids.map((id) => {
      const met = coverage.behaviours[id];
      const row = document.createElement("tr");
      row.dataset.behaviour = id;
      if (!met.exercised) row.className = "never";
      cell(row, id);
      cell(row, met.exercised, met.exercised ? "met" : "");
      cell(row, met.meaning, "wrap");
      return row;
    });
    $("coverage").tBodies[0].replaceChildren(...rows);
    setText($("coverage-summary"),
      `${coverage.met} of ${ids.length} behaviours met by the ${coverage.requests} requests ` +
      "the journal holds (Clear journal or Reset mock to start again)");
    setText($("coverage-never"), `never met (${coverage.never.length}): ` +
      (coverage.never.join(", ") || "none"));
    $("coverage-habits").replaceChildren(...coverage.habits.map((habit) => {
      const item = document.createElement("li");
      item.dataset.habit = habit.id;
      item.textContent = `${habit.id}: session ${habit.session}: ${habit.detail}`;
      return item;
    }));
  }

  function setText(element, text) {
    if (element.textContent !== text) element.textContent = text; // unchanged text stays selected
  }

  async function refreshHealth() {
    const health = await json("health");
    setText($("health"),
      (health.tenant ? `tenant ${health.tenant} · ` : "") +
      `schema ${health.schema} · rate limit ${health.rate_limit} · session lifetime ` +
      `${health.session_lifetime} s · ${health.journal_entries} journal entries`);
    const scenario = health.scenario_problem;
    $("scenario-problem").hidden = !scenario;
    setText($("scenario-problem"), scenario ? `scenario edit rejected, the previous one is ` +
      `still served: ${scenario}` : "");
    if (!keyKnown || (health.default_key || null) !== defaultKey) {
      keyKnown = true;
      defaultKey = health.default_key || null;
      $("key-note").hidden = Boolean(defaultKey);
      refreshSessions().catch((error) => showProblem($("problem"), error));
    }
    const proxy = health.proxy;
    $("proxy").hidden = !proxy;
    // While proxying, /e answers from the upstream: this mock's sessions are never served.
    $("mint-section").hidden = $("sessions-section").hidden = Boolean(proxy);
    if (proxy) {
      setText($("proxy"),
        `proxying to ${proxy.upstream}: ${proxy.breaching_answers} of ${proxy.answers} ` +
        `answers broke the contract (${proxy.violations} violations), ` +
        `${proxy.upstream_failures} upstream failures`);
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
    idCell(row, session.n);
    cell(row, session.verdict);
    cell(row, session.conclusive);
    timeCell(row, session.expires_at ? new Date(session.expires_at) : null, true);
    cell(row, JSON.stringify(session.always ? [session.always] : session.script || []), "wrap");
    const fetchCell = cell(row, "");
    fetchCell.appendChild(copyButton(curlLine(session.n), "copy curl"));
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
    // "503, 418, reset, delay 2000" -> [503, {"status": 418}, "reset", {"delay_ms": 2000}]; the
    // form's hint (#script-help) says this; the mock checks the rest and says what it takes.
    return text.split(",").map((s) => s.trim()).filter(Boolean).map((step) => {
      const delay = step.match(/^delay[\s:=]*(\d+)$/i);
      if (delay) return { delay_ms: Number(delay[1]) };
      if (!/^\d+$/.test(step)) return step;
      return SHORT_STATUSES.includes(Number(step)) ? Number(step) : { status: Number(step) };
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
      $("minted-copy").replaceChildren(copyButton(session.n, "copy id"));
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
      await Promise.all([refreshJournal(), refreshHealth(), refreshCoverage()]);
      showProblem($("problem"), null);
    } catch (error) {
      showProblem($("problem"), error);
    }
  }

  async function loop() {
    if ($("live").checked && !document.hidden) await tick();
    polls += 1;
    document.documentElement.dataset.polls = String(polls); // for tests: a poll went by
    setTimeout(loop, 1000);
  }

  loop(); // its first health read draws the sessions, with the right curl lines
})();
