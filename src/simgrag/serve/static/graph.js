// Graphs drawn to be read: a layered left-to-right layout (the named entities on the left, what the
// question asks for on the right), positions computed here and handed to cytoscape as a "preset" layout.
//   layer = hop distance from the named entities (an edge inside one layer pushes its target one layer
//           right); rows = order in a layer, by the mean row of the neighbours on the left.
// The pattern graph is laid out first; every evidence subgraph reuses its pattern nodes' slots, so all
// graphs read the same way. Gaps come from the measured label widths, so no label touches a node; the
// drawing is never zoomed below 1 (labels 12 px): the box grows (and scrolls sideways when wider than
// the page) instead.
"use strict";

const GRAPH = {
  font: 12,            // px at zoom 1: every label is drawn at least this large
  node: 26,            // node diameter (the asked node: 34)
  labelMax: 170,       // wrap width of node and edge labels
  lineHeight: 15,
  pad: 28,
  maxZoom: 1.25,       // on wide screens the drawing grows up to this
  parallel: 80,        // edges between the same two nodes bend this far apart (their labels must not meet)
};

let measureContext = null;
function textWidth(text) {
  if (!measureContext) {
    measureContext = document.createElement("canvas").getContext("2d");
    measureContext.font = `${GRAPH.font}px ${getComputedStyle(document.body).fontFamily}`;
  }
  return measureContext.measureText(text).width;
}

// width and line count of a label wrapped at GRAPH.labelMax (a rough word wrap, kept conservative)
function labelBox(text) {
  let width = 0;
  let lines = 0;
  for (const line of String(text || "").split("\n")) {
    const w = textWidth(line);
    width = Math.max(width, Math.min(w, GRAPH.labelMax));
    lines += Math.max(1, Math.ceil(w / GRAPH.labelMax));
  }
  return { width: width + 8, lines };
}

// {id: {layer, row}} for nodes `ids` (in order), edges [[source, target]], seeds: the named nodes
function layeredSlots(ids, edges, seeds) {
  const neighbours = new Map(ids.map((id) => [id, []]));
  for (const [s, t] of edges) {
    if (s === t || !neighbours.has(s) || !neighbours.has(t)) continue;
    neighbours.get(s).push(t);
    neighbours.get(t).push(s);
  }
  const layer = new Map();
  const bfs = (starts) => {
    const queue = [...starts];
    starts.forEach((id) => layer.set(id, 0));
    while (queue.length) {
      const id = queue.shift();
      for (const next of neighbours.get(id)) {
        if (!layer.has(next)) { layer.set(next, layer.get(id) + 1); queue.push(next); }
      }
    }
  };
  bfs(ids.filter((id) => seeds.has(id)));
  const incoming = new Set(edges.map(([, t]) => t));
  for (const id of ids) {  // a part without a named node starts at a node nothing points to
    if (layer.has(id)) continue;
    const part = [];
    const stack = [id];
    const seen = new Set([id]);
    while (stack.length) {
      const x = stack.pop();
      part.push(x);
      for (const n of neighbours.get(x)) if (!seen.has(n) && !layer.has(n)) { seen.add(n); stack.push(n); }
    }
    bfs([part.find((x) => !incoming.has(x)) || id]);
  }
  for (let round = 0; round < ids.length * ids.length; round++) {  // no edge inside a layer
    const tied = edges.find(([s, t]) => s !== t && layer.get(s) === layer.get(t));
    if (!tied) break;
    const [s, t] = tied;  // a leaf moves left of its one neighbour; otherwise the target moves right
    if (neighbours.get(s).length === 1 && !seeds.has(s) && layer.get(t) > 0) layer.set(s, layer.get(t) - 1);
    else layer.set(t, layer.get(t) + 1);
  }
  const used = [...new Set(layer.values())].sort((a, b) => a - b);  // no empty layer
  ids.forEach((id) => layer.set(id, used.indexOf(layer.get(id))));

  const slots = {};
  const byLayer = used.map((_, i) => ids.filter((id) => layer.get(id) === i));
  byLayer.forEach((members, i) => {
    const order = members.map((id, k) => {
      const left = neighbours.get(id).filter((n) => layer.get(n) < i && slots[n]);
      const mean = left.length ? left.reduce((sum, n) => sum + slots[n].row, 0) / left.length : k;
      return { id, key: mean, k };
    }).sort((a, b) => a.key - b.key || a.k - b.k);
    order.forEach(({ id }, row) => { slots[id] = { layer: i, row, rows: members.length }; });
  });
  return slots;
}

// Positions (model coordinates) from slots; the gaps from the labels of these elements.
function placed(elements, slots) {
  const nodes = elements.filter((e) => !e.data.source);
  const edges = elements.filter((e) => e.data.source);
  const nodeBoxes = nodes.map((n) => labelBox(n.data.label));
  const edgeBoxes = edges.map((e) => labelBox(e.data.label));
  const nodeW = Math.max(GRAPH.node, ...nodeBoxes.map((b) => b.width));
  const edgeW = Math.max(0, ...edgeBoxes.map((b) => b.width));
  const lines = Math.max(1, ...nodeBoxes.map((b) => b.lines));
  const edgeLines = Math.max(1, ...edgeBoxes.map((b) => b.lines));
  // an edge label sits half way between two layers: clear of both layers' node labels
  const colGap = Math.max(nodeW + edgeW + 24, GRAPH.node * 2 + 60);
  const rowGap = GRAPH.node + 14 + lines * GRAPH.lineHeight + Math.max(24, edgeLines * GRAPH.lineHeight);
  const layers = Math.max(1, ...Object.values(slots).map((s) => s.layer + 1));
  const rows = Math.max(1, ...Object.values(slots).map((s) => s.rows));
  const position = (slot) => ({ x: slot.layer * colGap, y: (slot.row - (slot.rows - 1) / 2) * rowGap });
  for (const node of nodes) node.position = position(slots[node.data.id] || { layer: 0, row: 0, rows: 1 });
  // an edge that skips a layer arcs above the nodes between
  const byId = new Map(nodes.map((n) => [n.data.id, n]));
  for (const edge of edges) {
    const a = slots[edge.data.source];
    const b = slots[edge.data.target];
    if (a && b && Math.abs(a.layer - b.layer) > 1) {
      edge.classes = ((edge.classes || "") + " skip").trim();
      edge.data.arc = -0.9 * rowGap * Math.sign(byId.get(edge.data.target).position.x - byId.get(edge.data.source).position.x || 1);
      edge.data.labelOffset = colGap / 2;  // its label in the first gap, where no node is
    }
  }
  const pairs = edges.map((e) => [e.data.source, e.data.target].sort().join("\u0001"));
  const parallel = pairs.some((pair, i) => pairs.indexOf(pair) !== i);  // bent apart: room above and below
  const arcs = (edges.some((e) => (e.classes || "").includes("skip")) ? rowGap : 0) + (parallel ? GRAPH.parallel : 0);
  return {
    width: (layers - 1) * colGap + nodeW + 2 * GRAPH.pad,
    height: (rows - 1) * rowGap + GRAPH.node + 12 + lines * GRAPH.lineHeight + arcs + 2 * GRAPH.pad,
    layers, rows,
  };
}

// Draw `elements` in `box` at the slots; the box is sized to the drawing (zoom >= 1, never below).
function drawLayered(box, elements, slots, style, onHover) {
  const size = placed(elements, slots);
  const available = Math.max(200, box.parentElement.clientWidth);
  const zoom = Math.max(1, Math.min(GRAPH.maxZoom, available / size.width));
  box.style.width = Math.ceil(size.width * zoom) + "px";  // sized to the drawing, not the page
  box.style.height = Math.ceil(size.height * zoom) + "px";
  box.parentElement.classList.toggle("scrolls", size.width * zoom > available + 1);
  const cy = cytoscape({
    container: box, elements, style, layout: { name: "preset", fit: false },
    minZoom: zoom, maxZoom: zoom, userZoomingEnabled: false, userPanningEnabled: false, boxSelectionEnabled: false,
  });
  cy.zoom(zoom);
  cy.center();
  cy.on("mouseover", "node", (event) => onHover(event.target, true));
  cy.on("mouseout", "node", (event) => onHover(event.target, false));
  cy.on("mouseover", "edge", (event) => { box.title = event.target.data("title") || ""; });
  cy.on("mouseout", "edge", () => { box.title = ""; });
  cy.scratch("_simgrag", { zoom, layers: size.layers, rows: size.rows });
  return cy;
}

window.simgragGraph = { GRAPH, layeredSlots, drawLayered };
