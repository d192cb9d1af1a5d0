// simgrag evidence page: ask / verify through the HTTP API ("stream": the stages shown as they happen),
// draw the pattern and each retrieved subgraph with cytoscape.js (vendored; laid out left to right by
// graph.js), colour every KG node by the pattern node it matched.
// Honest answers (answer.js): the answer said once — a list as a count and its names grouped under the
// entity that links them, the rest one click away —, a substituted name said out loud, "not found in
// the KG" with the nearest evidence, and "LLM" only where the LLM answered.
// A retriever without matched subgraphs (kaping, pcst, paths, …; the response's evidence is null) has
// its context drawn instead: its triples as one graph, or one graph per path, each entity its own
// node; topic entities are coloured, answers ringed.
"use strict";

const PALETTE = ["#2f6fde", "#0f8a5f", "#d9480f", "#7048e8", "#c2255c", "#1098ad", "#5c940d", "#e67700"];
const STAGES = [["pattern_s", "pattern (LLM)"], ["embed_s", "embed"], ["vector_s", "vector search"],
                ["graph_s", "graph search"], ["answers_s", "answer set"], ["link_s", "entity linking"], ["retrieve_s", "retrieval"],
                ["answer_s", "answer (LLM)"], ["verify_s", "verify (LLM)"], ["total_s", "total (server)"]];
const $ = (id) => document.getElementById(id);
window.simgrag = { graphs: [], pattern: null, last: null, perRequest: {}, retriever: "", timeline: [] };

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

// labels at 12 px (graph.js never zooms below 1); wrapped at graph.js's GRAPH.labelMax
const LABEL = { "font-size": 12, "text-wrap": "wrap", "text-max-width": 170, "color": "#1d2433" };

const STYLE = [
  { selector: "node", style: {
      ...LABEL, "background-color": "data(colour)", "label": "data(label)", "text-valign": "bottom",
      "text-margin-y": 7, "width": 26, "height": 26, "border-width": 2, "border-color": "#ffffff" } },
  { selector: "node.unknown", style: { "border-color": "#1d2433", "border-style": "dashed", "border-width": 2 } },
  { selector: "node.asked", style: { "width": 34, "height": 34, "border-color": "#0f8a5f", "border-width": 4, "border-style": "solid" } },
  { selector: "node.hl", style: { "overlay-color": "#2f6fde", "overlay-opacity": 0.18, "overlay-padding": 8 } },
  { selector: "edge", style: {
      ...LABEL, "curve-style": "bezier", "control-point-step-size": 80, "target-arrow-shape": "triangle", "width": 2, "line-color": "#98a2b3",
      "target-arrow-color": "#98a2b3", "label": "data(label)", "color": "#344054",
      "text-background-color": "#ffffff", "text-background-opacity": 0.92, "text-background-padding": 2,
      "text-background-shape": "roundrectangle" } },
  { selector: "edge.skip", style: { "curve-style": "unbundled-bezier", "control-point-distances": "data(arc)",
      "control-point-weights": 0.5, "label": "", "source-label": "data(label)", "source-text-offset": "data(labelOffset)" } },
];

// every graph drawn for the last result, to draw again when the window's width changes
const drawings = [];

function draw(box, elements, slots) {
  const cy = window.simgragGraph.drawLayered(box, elements, slots, STYLE, (node, on) => {
    highlight(node.data("patternNode"), on);
    box.title = on ? node.data("title") || "" : "";
  });
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
  return { colours: colourFor(topic), slots: null };
}

function drawPattern(pattern, askedNode) {
  const names = patternNodesOf(pattern);
  const colours = colourFor(names);
  const elements = names.map((name, i) => ({
    data: { id: "p" + i, label: name, colour: colours.get(name), patternNode: name,
            title: isUnknown(name) ? `${name}: what the question asks for` : `${name}: named in the question` },
    classes: [isUnknown(name) ? "unknown" : "", name === askedNode ? "asked" : ""].join(" "),
  }));
  pattern.forEach(([h, r, t], i) => elements.push({
    data: { id: "pe" + i, source: "p" + names.indexOf(h), target: "p" + names.indexOf(t), label: r } }));
  const slots = window.simgragGraph.layeredSlots(names.map((_, i) => "p" + i),
    pattern.map(([h, , t]) => ["p" + names.indexOf(h), "p" + names.indexOf(t)]),
    new Set(names.flatMap((name, i) => (isUnknown(name) ? [] : ["p" + i]))));
  const byPatternNode = new Map(names.map((name, i) => [name, slots["p" + i]]));
  if (window.simgrag.pattern) window.simgrag.pattern.destroy();
  const box = graphBox($("pattern-graph"), "pattern-graph-canvas");
  const columns = $("pattern-graph").closest(".two-col");
  const redraw = () => {
    columns.classList.remove("stacked");
    for (;;) {
      if (window.simgrag.pattern) window.simgrag.pattern.destroy();
      window.simgrag.pattern = draw(box, elements, slots);
      if (!$("pattern-graph").classList.contains("scrolls") || columns.classList.contains("stacked")) break;
      columns.classList.add("stacked");  // too wide beside the timings: the timings go below
    }
  };
  redraw();
  drawings.push(redraw);
  return { colours, slots: byPatternNode };
}

// a fresh drawing box inside `holder` (which scrolls sideways when the drawing is wider than the page)
function graphBox(holder, testid) {
  holder.replaceChildren();
  const box = document.createElement("div");
  box.className = "canvas";
  if (testid) box.dataset.testid = testid;
  holder.append(box);
  return box;
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

function drawEvidence(matches, layout, askedNode, retriever, other, answers = []) {
  const { colours, slots } = layout;
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
  const cards = [];
  matches.forEach((match, i) => {
    const card = document.createElement("div");
    card.className = "match";
    card.dataset.testid = "match-" + i;
    const head = document.createElement("div");
    head.className = "match-head";
    head.innerHTML = `<strong>#${match.rank}</strong><span></span>`;
    head.children[1].textContent = other ? `${retriever} · ${match.edges.length} triple(s)` : `GSD ${fmt(match.gsd)}`;
    const holder = document.createElement("div");
    holder.className = "graph";
    card.append(head, holder, other ? tripleTable(match) : mappingTable(match, colours));
    if (match.edges.some((edge) => edge.iris)) card.append(iriTable(match));
    root.append(card);
    const box = graphBox(holder, "evidence-graph-" + i);

    const byName = new Map();
    const elements = [];
    const own = {};  // each node at its pattern node's slot: every subgraph reads like the pattern
    match.nodes.forEach((node, j) => {
      if (byName.has(node.entity)) return;
      const id = node.entity_id >= 0 ? "n" + node.entity_id : "x" + j;
      byName.set(node.entity, id);
      if (slots && slots.has(node.pattern_node)) own[id] = slots.get(node.pattern_node);
      const label = other ? node.entity + (colours.has(node.entity) ? `\ntopic · d=${fmt(node.distance)}` : "")
        : `${node.entity}\n${node.pattern_node !== node.entity ? node.pattern_node + " · " : ""}d=${fmt(node.distance)}`;
      const asked = other ? answers.includes(node.entity) : node.pattern_node === askedNode;
      elements.push({
        data: { id, label, entity: node.entity, patternNode: node.pattern_node, distance: node.distance,
                colour: colours.get(node.pattern_node) || "#98a2b3",
                title: other ? node.entity : `${node.entity} ← pattern node ${node.pattern_node}, distance ${fmt(node.distance)}` },
        classes: [node.unknown ? "unknown" : "", asked ? "asked" : ""].join(" "),
      });
    });
    const links = [];
    match.edges.forEach((edge, j) => {
      const [h, r, t] = edge.triple;
      if (!byName.has(h) || !byName.has(t)) return;
      const label = other ? r + (edge.score != null ? `\ns=${fmt(edge.score)}` : "") : `${r}\nd=${fmt(edge.distance)}`;
      links.push([byName.get(h), byName.get(t)]);
      elements.push({ data: { id: `e${j}`, source: byName.get(h), target: byName.get(t), relation: r,
                              label, distance: edge.distance,
                              title: other ? `(${edge.triple.join(", ")})` : `(${edge.triple.join(", ")}) for pattern edge `
                                + `(${edge.pattern.join(", ")}), distance ${fmt(edge.distance)}` } });
    });
    const ids = elements.filter((e) => !e.data.source).map((e) => e.data.id);
    const complete = ids.every((id) => own[id]);
    const seeds = new Set(elements.filter((e) => !e.data.source && (other ? colours.has(e.data.entity)
      : !isUnknown(e.data.patternNode))).map((e) => e.data.id));
    const placedAt = complete ? own : window.simgragGraph.layeredSlots(ids, links, seeds);
    const at = i;
    const redraw = () => {
      if (window.simgrag.graphs[at]) window.simgrag.graphs[at].destroy();
      card.classList.remove("wide");
      window.simgrag.graphs[at] = draw(box, elements, placedAt);
      if (holder.classList.contains("scrolls") && getComputedStyle(root).gridTemplateColumns.split(" ").length > 1) {
        card.classList.add("wide");  // too wide for a column: the whole row, before a scroll bar
        window.simgrag.graphs[at].destroy();
        window.simgrag.graphs[at] = draw(box, elements, placedAt);
      }
    };
    cards.push(redraw);
  });
  cards.forEach((redraw) => redraw());  // every card in place first: the grid's columns are final
  drawings.push(...cards);
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

// POST with "stream": the stage events to `onStage` as they come; the result (or the error) at the end
async function apiStream(path, body, onStage) {
  const response = await fetch(path, { method: "POST", headers: apiHeaders(), body: JSON.stringify({ ...body, stream: true }) });
  if (!response.ok || !response.body) {
    let payload = null;
    try { payload = await response.json(); } catch (_) { /* not JSON */ }
    throw new Error(`${response.status}: ${(payload && (payload.detail || payload.error)) || response.statusText}`);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 1);
      if (!line) continue;
      const event = JSON.parse(line);
      if (event.event === "stage") onStage(event);
      else if (event.event === "result") return event;
      else if (event.event === "error") {
        const detail = event.error && (event.error.detail || event.error.error);
        throw new Error(`${event.status}: ${detail}`);
      }
    }
    if (done) throw new Error("the server closed the stream without a result");
  }
}

function showResult(mode, result, roundTrip) {
  window.simgrag.last = result;
  $("result").hidden = false;
  drawings.length = 0;
  window.simgragAnswer.showAnswer(mode, result);
  window.simgragAnswer.showAnswerSet(result);
  window.simgrag.timeline.push({ what: "answer", at: performance.now() });
  const askedNode = result.asked_node || null;
  const retriever = result.retriever;
  const other = !result.evidence;  // no matched subgraphs: draw the retriever's context
  const layout = other ? noPattern(result) : drawPattern(result.pattern, askedNode);
  $("evidence-hint").textContent = other ? `the ${retriever} retriever's triples (s = its score); topic entities coloured, answers ringed`
    : "top-k subgraphs by Graph Semantic Distance, read left to right like the pattern; hover a node or an edge for its distance";
  const matches = other ? contextMatches(result.context) : result.evidence.matches;
  drawEvidence(matches, layout, askedNode, retriever, other, result.entities || []);
  showTimings(result.timings, roundTrip);
  setStatus(other ? `${retriever}: ${matches.reduce((n, m) => n + m.edges.length, 0)} triple(s)`
    : `${matches.length} subgraph(s)` + (result.evidence.complete ? "" : " (search stopped at its deadline: best so far)"));
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
  setStatus("");
  const progress = new window.simgragAnswer.Progress($("progress"));
  const start = performance.now();
  try {
    const done = await apiStream("/v1/" + mode, body, (stage) => progress.stage(stage));
    progress.finish(done.elapsed_s);
    showResult(mode, done.result, (performance.now() - start) / 1000);
  } catch (error) {
    progress.finish();
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
  let resizing = null;
  window.addEventListener("resize", () => {  // the graphs follow the page's width
    clearTimeout(resizing);
    resizing = setTimeout(() => drawings.forEach((redraw) => redraw()), 150);
  });
  refreshHealth();
});
