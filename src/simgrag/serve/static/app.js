// simgrag evidence page: ask / verify through the HTTP API, draw the pattern and each retrieved
// subgraph with cytoscape.js (vendored), colour every KG node by the pattern node it matched.
// Honest answers: every answer the KG holds (the answer set, collapsed: the first names as chips, the
// rest one click away, one line per path shape), a substituted name said out loud, and "not found in
// the KG" with the nearest evidence.
// A retriever without matched subgraphs (kaping, pcst, paths, …; the response's evidence is null) has
// its context drawn instead: its triples as one graph, or one graph per path, each entity its own
// node; topic entities are coloured, answers ringed.
"use strict";

const PALETTE = ["#2f6fde", "#0f8a5f", "#d9480f", "#7048e8", "#c2255c", "#1098ad", "#5c940d", "#e67700"];
const STAGES = [["pattern_s", "pattern (LLM)"], ["embed_s", "embed"], ["vector_s", "vector search"],
                ["graph_s", "graph search"], ["answers_s", "answer set"], ["link_s", "entity linking"], ["retrieve_s", "retrieval"],
                ["answer_s", "answer (LLM)"], ["verify_s", "verify (LLM)"], ["total_s", "total (server)"]];
const $ = (id) => document.getElementById(id);
const SHOWN_ANSWERS = 24;  // answers shown before "show all"
window.simgrag = { graphs: [], pattern: null, last: null, perRequest: {}, retriever: "" };

function apiHeaders() {
  const headers = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) headers["X-API-Key"] = key;
  return headers;
}

async function api(path, body) {
  const init = body === undefined ? { headers: apiHeaders() } : { method: "POST", headers: apiHeaders(), body: JSON.stringify(body) };
  const response = await fetch(path, init);
  let payload = null;
  try { payload = await response.json(); } catch (_) { /* not JSON */ }
  if (!response.ok) {
    const detail = payload && (payload.detail !== undefined ? payload.detail : payload.error);
    const text = typeof detail === "string" ? detail : JSON.stringify(detail);
    throw new Error(`${response.status}: ${text || response.statusText}`);
  }
  return payload;
}

async function refreshHealth() {
  const badge = $("health");
  try {
    const response = await fetch("/v1/health", { headers: apiHeaders() });
    const health = await response.json();
    badge.className = "badge " + health.status;
    if (health.status !== "ready") {
      badge.textContent = health.status === "failed" ? "failed: " + health.error : "loading index and models…";
      if (health.status === "loading") setTimeout(refreshHealth, 2000);
      return;
    }
    badge.textContent = "ready";
    fillRetrievers(health.retrievers || [], health.retriever);
    window.simgrag.perRequest = health.per_request || {};
    window.simgrag.retriever = health.retriever;
    try {
      const stats = await api("/v1/kg/stats");
      badge.textContent = `ready · ${stats.entities.toLocaleString()} entities · ${stats.triples.toLocaleString()} triples · LLM ${health.llm || "none"} · retriever ${health.retriever}`;
    } catch (_) { /* stats may need the API key */ }
  } catch (error) {
    badge.className = "badge failed";
    badge.textContent = "server unreachable";
    setTimeout(refreshHealth, 4000);
  }
}

function fillRetrievers(names, chosen) {
  const select = $("retriever");
  if (!select || select.options.length) return;
  for (const name of names.length ? names : [chosen]) {
    const option = document.createElement("option");
    option.value = option.textContent = name;
    option.selected = name === chosen;
    select.append(option);
  }
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function colourFor(patternNodes) {
  const colours = new Map();
  patternNodes.forEach((name, i) => colours.set(name, PALETTE[i % PALETTE.length]));
  return colours;
}

function patternNodesOf(pattern) {
  const names = [];
  for (const [h, , t] of pattern) for (const n of [h, t]) if (!names.includes(n)) names.push(n);
  return names;
}

const isUnknown = (name) => /^UNKNOWN\b/i.test(name.trim());

const STYLE = [
  { selector: "node", style: {
      "background-color": "data(colour)", "label": "data(label)", "color": "#1d2433", "font-size": 11,
      "text-wrap": "wrap", "text-max-width": 150, "text-valign": "bottom", "text-margin-y": 4,
      "width": 26, "height": 26, "border-width": 2, "border-color": "#ffffff" } },
  { selector: "node.unknown", style: { "border-color": "#1d2433", "border-style": "dashed", "border-width": 2 } },
  { selector: "node.asked", style: { "width": 34, "height": 34, "border-color": "#0f8a5f", "border-width": 4, "border-style": "solid" } },
  { selector: "node.hl", style: { "overlay-color": "#2f6fde", "overlay-opacity": 0.18, "overlay-padding": 8 } },
  { selector: "edge", style: {
      "curve-style": "bezier", "target-arrow-shape": "triangle", "width": 2, "line-color": "#98a2b3",
      "target-arrow-color": "#98a2b3", "label": "data(label)", "font-size": 10, "color": "#475467",
      "text-background-color": "#ffffff", "text-background-opacity": 0.85,
      "text-background-padding": 2 } },
];

function draw(container, elements, extra = {}) {
  const cy = cytoscape({ container, elements, style: STYLE, wheelSensitivity: 0.2, maxZoom: 1.4, minZoom: 0.2,
                         layout: { name: "breadthfirst", directed: true, padding: 30, spacingFactor: 1.2,
                                   // left to right, so edge labels read horizontally
                                   transform: (_node, pos) => ({ x: pos.y * 2.2, y: pos.x * 0.6 }) },
                         ...extra });
  cy.on("mouseover", "node", (event) => highlight(event.target.data("patternNode"), true));
  cy.on("mouseout", "node", (event) => highlight(event.target.data("patternNode"), false));
  return cy;
}

function highlight(patternNode, on) {
  if (!patternNode) return;
  const graphs = [window.simgrag.pattern, ...window.simgrag.graphs].filter(Boolean);
  for (const cy of graphs) {
    cy.nodes().filter((n) => n.data("patternNode") === patternNode).toggleClass("hl", on);
  }
  document.querySelectorAll(`tr[data-pattern-node]`).forEach((row) => {
    if (row.dataset.patternNode === patternNode) row.classList.toggle("hl", on);
  });
}

function noPattern(result) {
  // no pattern graph: colour the retriever's topic entities instead
  if (window.simgrag.pattern) window.simgrag.pattern.destroy();
  window.simgrag.pattern = null;
  const box = $("pattern-graph");
  box.replaceChildren();
  const topic = (result.context && result.context.topic) ? result.context.topic.names : [];
  const p = document.createElement("p");
  p.className = "empty";
  p.textContent = `The ${result.retriever} retriever writes no pattern graph` + (topic.length ? `; topic: ${topic.join(", ")}` : ".");
  box.append(p);
  return colourFor(topic);
}

function drawPattern(pattern, askedNode) {
  const names = patternNodesOf(pattern);
  const colours = colourFor(names);
  const elements = names.map((name, i) => ({
    data: { id: "p" + i, label: name, colour: colours.get(name), patternNode: name },
    classes: [isUnknown(name) ? "unknown" : "", name === askedNode ? "asked" : ""].join(" "),
  }));
  pattern.forEach(([h, r, t], i) => elements.push({
    data: { id: "pe" + i, source: "p" + names.indexOf(h), target: "p" + names.indexOf(t), label: r } }));
  if (window.simgrag.pattern) window.simgrag.pattern.destroy();
  $("pattern-graph").replaceChildren();
  window.simgrag.pattern = draw($("pattern-graph"), elements);
  return colours;
}

function fmt(x) { return Number(x).toFixed(3); }

// A context without subgraphs as matches: one per path, else one holding every triple; each entity its
// own node, a topic entity at its link distance, each triple with the retriever's score when it has one.
function contextMatches(context) {
  const key = (t) => t.join("\u0001");
  const score = new Map(context.triples.map((t, i) => [key(t), context.scores[i]]));
  const topic = context.topic || { names: [], distances: [] };
  const link = new Map(topic.names.map((name, i) => [name, topic.distances[i] || 0]));
  const groups = context.paths.length ? context.paths : (context.triples.length ? [context.triples] : []);
  return groups.map((triples, i) => {
    const names = [...new Set(triples.flatMap(([h, , t]) => [h, t]))];
    return {
      rank: i + 1, gsd: 0,
      nodes: names.map((name) => ({ pattern_node: name, entity: name, entity_id: -1, distance: link.get(name) || 0, unknown: false })),
      edges: triples.map((t) => ({ pattern: [], triple: t, distance: 0, score: score.has(key(t)) ? score.get(key(t)) : null })),
    };
  });
}

function drawEvidence(matches, colours, askedNode, retriever, other, answers = []) {
  window.simgrag.graphs.forEach((cy) => cy.destroy());
  window.simgrag.graphs = [];
  const root = $("evidence");
  root.replaceChildren();
  if (!matches.length) {
    const p = document.createElement("p");
    p.className = "empty";
    p.textContent = other ? `The ${retriever} retriever found no triples.` : "No subgraph of the KG matches this pattern.";
    root.append(p);
    return;
  }
  matches.forEach((match, i) => {
    const card = document.createElement("div");
    card.className = "match";
    card.dataset.testid = "match-" + i;
    const head = document.createElement("div");
    head.className = "match-head";
    head.innerHTML = `<strong>#${match.rank}</strong><span></span>`;
    head.children[1].textContent = other ? `${retriever} · ${match.edges.length} triple(s)` : `GSD ${fmt(match.gsd)}`;
    const box = document.createElement("div");
    box.className = "graph";
    box.dataset.testid = "evidence-graph-" + i;
    card.append(head, box, other ? tripleTable(match) : mappingTable(match, colours));
    if (match.edges.some((edge) => edge.iris)) card.append(iriTable(match));
    root.append(card);

    const byName = new Map();
    const elements = [];
    match.nodes.forEach((node, j) => {
      if (byName.has(node.entity)) return;
      const id = node.entity_id >= 0 ? "n" + node.entity_id : "x" + j;
      byName.set(node.entity, id);
      const label = other ? node.entity + (colours.has(node.entity) ? `\ntopic · d=${fmt(node.distance)}` : "")
        : `${node.entity}\n${node.pattern_node !== node.entity ? node.pattern_node + " · " : ""}d=${fmt(node.distance)}`;
      const asked = other ? answers.includes(node.entity) : node.pattern_node === askedNode;
      elements.push({
        data: { id, label, entity: node.entity, patternNode: node.pattern_node, distance: node.distance,
                colour: colours.get(node.pattern_node) || "#98a2b3" },
        classes: [node.unknown ? "unknown" : "", asked ? "asked" : ""].join(" "),
      });
    });
    match.edges.forEach((edge, j) => {
      const [h, r, t] = edge.triple;
      if (!byName.has(h) || !byName.has(t)) return;
      const label = other ? r + (edge.score != null ? ` · s=${fmt(edge.score)}` : "") : `${r} · d=${fmt(edge.distance)}`;
      elements.push({ data: { id: `e${j}`, source: byName.get(h), target: byName.get(t), relation: r,
                              label, distance: edge.distance } });
    });
    window.simgrag.graphs.push(draw(box, elements));
  });
}

function mappingTable(match, colours) {
  const table = document.createElement("table");
  table.className = "mapping";
  table.innerHTML = "<tr><th>pattern node</th><th>KG entity</th><th>distance</th></tr>";
  for (const node of match.nodes) {
    const row = document.createElement("tr");
    row.dataset.patternNode = node.pattern_node;
    const swatch = `<span style="color:${colours.get(node.pattern_node) || "#98a2b3"}">●</span>`;
    row.innerHTML = `<td>${swatch} </td><td class="${node.unknown ? "unknown" : ""}"></td><td>${fmt(node.distance)}</td>`;
    row.children[0].append(document.createTextNode(node.pattern_node));
    row.children[1].append(iriLink(node.entity, node.iri));
    table.append(row);
  }
  return table;
}

// a link to the term's IRI (http/https only: an RDF file may hold any scheme), else plain text
function iriLink(text, iri) {
  const safe = iri && /^https?:\/\//i.test(iri);
  const element = document.createElement(safe ? "a" : "span");
  element.textContent = text;
  if (iri) element.title = iri;
  if (safe) {
    element.href = iri;
    element.target = "_blank";
    element.rel = "noopener noreferrer";
    element.className = "iri";
  }
  return element;
}

// the matched triples with head, relation and tail linked to their IRIs (KGs read from RDF)
function iriTable(match) {
  const table = document.createElement("table");
  table.className = "mapping iris";
  table.dataset.testid = "iri-table";
  table.innerHTML = "<tr><th>head</th><th>relation</th><th>tail</th></tr>";
  for (const edge of match.edges) {
    const row = table.insertRow();
    edge.triple.forEach((name, i) => row.insertCell().append(iriLink(name, edge.iris ? edge.iris[i] : null)));
  }
  return table;
}

function tripleTable(match) {
  const table = document.createElement("table");
  table.className = "mapping";
  table.innerHTML = "<tr><th>head</th><th>relation</th><th>tail</th><th>score</th></tr>";
  for (const edge of match.edges) {
    const row = table.insertRow();
    for (const cell of [...edge.triple, edge.score != null ? fmt(edge.score) : ""]) row.insertCell().textContent = cell;
  }
  return table;
}

// The answer set: its size and tolerance, the first answers as chips (all on request), one line per path shape.
function showAnswerSet(result) {
  const box = $("answer-set");
  const found = result.evidence && result.evidence.answer_set;
  box.replaceChildren();
  box.hidden = !found || !found.size || result.abstained;
  if (box.hidden) return;
  const head = document.createElement("div");
  const state = found.complete ? "" : found.capped ? " — capped: more matches exist" : " — search stopped at its deadline";
  head.innerHTML = "<strong></strong> <span class=\"hint\"></span>";
  head.children[0].textContent = `Answer set: ${found.size} answer${found.size === 1 ? "" : "s"} for ${found.asked_node}`;
  head.children[1].textContent = `every match within ${found.tolerance} of the best GSD ${fmt(found.best_gsd)} (${found.matches} match${found.matches === 1 ? "" : "es"})${state}`;
  const chips = document.createElement("div");
  chips.className = "chips";
  chips.dataset.testid = "answer-chips";
  const witness = new Map(found.answers.map((a) => [a.entity, a]));
  const addChips = (names) => names.forEach((name) => {
    const chip = document.createElement("span");
    chip.className = "chip";
    chip.textContent = name;
    const a = witness.get(name);
    if (a) chip.title = a.triples.map((t) => `(${t.join(", ")})`).join(" ") + ` · GSD ${fmt(a.gsd)}`;
    chips.append(chip);
  });
  addChips(found.names.slice(0, SHOWN_ANSWERS));
  box.append(head, chips);
  if (found.names.length > SHOWN_ANSWERS) {
    const more = document.createElement("button");
    more.type = "button";
    more.className = "more";
    more.dataset.testid = "answer-set-more";
    more.textContent = `show all ${found.names.length}`;
    more.addEventListener("click", () => { addChips(found.names.slice(SHOWN_ANSWERS)); more.remove(); });
    box.append(more);
  }
  const shapes = document.createElement("details");
  shapes.dataset.testid = "answer-shapes";
  shapes.innerHTML = `<summary>${found.groups.length} path shape${found.groups.length === 1 ? "" : "s"} (evidence)</summary>`;
  const list = document.createElement("ul");
  for (const group of found.groups) {
    const item = document.createElement("li");
    item.textContent = `${group.line}  · ${group.matches} match${group.matches === 1 ? "" : "es"}, GSD ${fmt(group.gsd)}`;
    list.append(item);
  }
  shapes.append(list);
  box.append(shapes);
}

function showTimings(timings, roundTrip) {
  const table = $("timings");
  table.replaceChildren();
  const rows = STAGES.filter(([key]) => key in timings).map(([key, label]) => [label, timings[key]]);
  rows.push(["round trip (browser)", roundTrip]);
  for (const [label, seconds] of rows) {
    const row = table.insertRow();
    row.insertCell().textContent = label;
    row.insertCell().textContent = seconds >= 1 ? `${seconds.toFixed(2)} s` : `${(seconds * 1000).toFixed(1)} ms`;
  }
}

function showAnswer(mode, result) {
  const answer = $("answer");
  const detail = $("answer-detail");
  if (mode === "verify") {
    answer.textContent = result.label;
    answer.className = "answer " + (result.label === "Supported" ? "supported" : result.label === "Refuted" ? "refuted" : "abstained");
  } else if (result.abstained) {
    answer.textContent = "Not found in the KG";
    answer.className = "answer abstained";
  } else {
    const names = result.entities || [];
    answer.textContent = names.length ? names.slice(0, SHOWN_ANSWERS).join(", ") +
      (names.length > SHOWN_ANSWERS ? ` … and ${names.length - SHOWN_ANSWERS} more (answer set below)` : "")
      : (result.short_answer || result.text);
    answer.className = "answer";
  }
  const notice = $("notice");
  const subs = (mode === "verify" ? [] : result.substitutions) || [];
  notice.hidden = !subs.length;
  notice.textContent = subs.map((s) => `${s.text} (distance ${fmt(s.distance)}; the KG has no '${s.pattern_node}')`).join("\n");
  const lines = [];
  if (result.text) lines.push((result.abstained ? "KG: " : "LLM: ") + result.text);
  if (result.reason) lines.push("why: " + result.reason);
  if (result.pattern_attempts > 1) lines.push(`pattern took ${result.pattern_attempts} attempts`);
  detail.textContent = lines.join("\n");
}

async function submit(event) {
  event.preventDefault();
  const mode = document.querySelector("input[name=mode]:checked").value;
  const text = $("text").value.trim();
  if (!text) return;
  const k = Math.max(1, Math.min(20, parseInt($("k").value, 10) || 3));
  const body = mode === "verify" ? { claim: text } : { question: text };
  const chosen = $("retriever") ? $("retriever").value : "";
  if (chosen) body.retriever = chosen;
  // k only for a retriever that takes it per request (the others fix theirs when the server builds them)
  if ((window.simgrag.perRequest[chosen || window.simgrag.retriever] || []).includes("k")) body.k = k;
  $("submit").disabled = true;
  setStatus(mode === "verify" ? "Verifying…" : "Thinking…");
  const start = performance.now();
  try {
    const result = await api("/v1/" + mode, body);
    const roundTrip = (performance.now() - start) / 1000;
    window.simgrag.last = result;
    $("result").hidden = false;
    showAnswer(mode, result);
    showAnswerSet(result);
    const askedNode = result.asked_node || null;
    const retriever = result.retriever;
    const other = !result.evidence;  // no matched subgraphs: draw the retriever's context
    const colours = other ? noPattern(result) : drawPattern(result.pattern, askedNode);
    $("evidence-hint").textContent = other ? `the ${retriever} retriever's triples (s = its score); topic entities coloured, answers ringed`
      : "top-k subgraphs by Graph Semantic Distance; hover a node to see its pattern node everywhere";
    const matches = other ? contextMatches(result.context) : result.evidence.matches;
    drawEvidence(matches, colours, askedNode, retriever, other, result.entities || []);
    showTimings(result.timings, roundTrip);
    setStatus(other ? `${retriever}: ${matches.reduce((n, m) => n + m.edges.length, 0)} triple(s)`
      : `${matches.length} subgraph(s)` + (result.evidence.complete ? "" : " (search stopped at its deadline: best so far)"));
  } catch (error) {
    setStatus(error.message, true);
  } finally {
    $("submit").disabled = false;
  }
}

function onModeChange() {
  const mode = document.querySelector("input[name=mode]:checked").value;
  $("submit").textContent = mode === "verify" ? "Verify" : "Ask";
  $("text").placeholder = mode === "verify" ? "Inception was directed by Christopher Nolan." : "Who directed Inception?";
}

document.addEventListener("DOMContentLoaded", () => {
  const saved = localStorage.getItem("simgrag-api-key");
  if (saved) $("api-key").value = saved;
  $("api-key").addEventListener("change", () => localStorage.setItem("simgrag-api-key", $("api-key").value));
  document.querySelectorAll("input[name=mode]").forEach((input) => input.addEventListener("change", onModeChange));
  $("query-form").addEventListener("submit", submit);
  refreshHealth();
});
