// Browser test of the evidence page: headless Chromium (Debian's) driven by playwright-core.
//   node browser_test.mjs URL QUESTION EXPECTED_ENTITIES(comma-separated) SCREENSHOT.png [--verify] [--retriever=NAME]
//        [--expect-substitution=TEXT] [--expect-abstained] [--expect-answer-set=N] [--expect-list-once]
//        [--expect-via=ENTITY] [--viewports=1280,1920] [--k=N]
// For each viewport width (default 1280): opens the page, waits for the server to be ready, asks the
// question, waits for the answer, checks that the first evidence graph contains every expected entity
// (with distances on its nodes and edges; with another retriever than simgrag, no distances but no
// pattern either), and measures the drawing: every node and edge label's rendered size (cytoscape zoom
// × font-size, and the label's rendered box), no label box overlapping a node's, no label cut off by
// its box, stage progress shown before the answer, the page's width used. Saves a full-page screenshot
// (SCREENSHOT for the first width, SCREENSHOT-<width>.png for the others; SCREENSHOT-progress.png
// while stages run, when they last long enough to be caught) and prints what it saw as JSON. Exit code
// 1 on failure.
import { chromium } from "playwright-core";

const [url, question, expectedList, screenshot, ...flags] = process.argv.slice(2);
if (!url || !question || !expectedList || !screenshot) {
  console.error("usage: node browser_test.mjs URL QUESTION ENTITY[,ENTITY...] SCREENSHOT.png [--verify]");
  process.exit(2);
}
const retriever = (flags.find((f) => f.startsWith("--retriever=")) || "--retriever=").slice(12);
const flagValue = (name) => { const f = flags.find((x) => x.startsWith(name + "=")); return f ? f.slice(name.length + 1) : null; };
const expectSubstitution = flagValue("--expect-substitution");
const expectAnswerSet = flagValue("--expect-answer-set");
const expectAbstained = flags.includes("--expect-abstained");
const expected = expectedList.split(",").map((s) => s.trim()).filter(Boolean);
const executablePath = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const timeout = Number(process.env.BROWSER_TEST_TIMEOUT_MS || 120000);

const MIN_LABEL_PX = 11;
const viewports = (flagValue("--viewports") || "1280").split(",").map(Number).filter(Boolean);
const shotFor = (width, i) => (i === 0 ? screenshot : screenshot.replace(/(\.png)?$/, `-${width}.png`));

// In the page: every graph's labels measured from the drawing.
function measureGraphs() {
  const inter = (a, b) => Math.max(0, Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1)) * Math.max(0, Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1));
  const shrink = (b, d) => ({ x1: b.x1 + d, y1: b.y1 + d, x2: b.x2 - d, y2: b.y2 - d });
  const graphs = [["pattern", window.simgrag.pattern], ...window.simgrag.graphs.map((cy, i) => [`evidence #${i + 1}`, cy])];
  return graphs.filter(([, cy]) => cy).map(([name, cy]) => {
    const zoom = cy.zoom();
    const onlyLabel = { includeNodes: false, includeEdges: false, includeLabels: true, includeOverlays: false };
    const bodies = cy.nodes().map((n) => ({ id: n.id(), box: n.renderedBoundingBox({ includeLabels: false, includeOverlays: false }) }));
    const labels = [...cy.nodes(), ...cy.edges()].filter((e) => e.data("label")).map((e) => ({
      id: e.id(), kind: e.isNode() ? "node" : "edge", text: e.data("label"),
      px: zoom * parseFloat(e.style("font-size")), box: e.renderedBoundingBox(onlyLabel),
    }));
    const overlaps = [];
    for (const label of labels) {
      for (const body of bodies) {
        if (inter(shrink(label.box, 1), body.box) > 0) overlaps.push(`${label.kind} label "${label.text.split("\n")[0]}" over node ${body.id}`);
      }
    }
    const { width, height } = cy.container().getBoundingClientRect();
    const clipped = labels.filter((l) => l.box.x1 < -1 || l.box.y1 < -1 || l.box.x2 > width + 1 || l.box.y2 > height + 1)
      .map((l) => l.text.split("\n")[0]);
    const px = (kind) => labels.filter((l) => l.kind === kind).map((l) => l.px);
    const nodeX = cy.nodes().map((n) => [n.data("patternNode"), n.renderedPosition().x]);
    const holder = cy.container().parentElement;
    return { name, zoom, box: [Math.round(width), Math.round(height)], scrolls: holder.scrollWidth > holder.clientWidth + 1, holderWidths: [holder.clientWidth, holder.scrollWidth, holder.className, holder.parentElement.className],
             minNodeLabelPx: Math.min(...px("node")), minEdgeLabelPx: px("edge").length ? Math.min(...px("edge")) : null,
             minLabelBoxHeight: Math.min(...labels.map((l) => l.box.h)), overlaps, clipped, nodeX };
  });
}

// In the page: how often the answer set's names are shown (expanded), and what the answer box says.
function answerOnce() {
  const found = window.simgrag.last && window.simgrag.last.evidence && window.simgrag.last.evidence.answer_set;
  const chips = [...document.querySelectorAll("[data-testid=answer-chips] .chip")].map((c) => c.textContent);
  const counts = new Map();
  chips.forEach((name) => counts.set(name, (counts.get(name) || 0) + 1));
  const head = document.querySelector(".answer-box").innerText;
  const escape = (x) => x.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const inHead = (found ? found.names : []).filter((n) => n.length > 3 && new RegExp(`(^|\\W)${escape(n)}(\\W|$)`).test(head));
  return {
    names: found ? found.names.length : 0, chips: chips.length,
    missing: found ? found.names.filter((n) => !counts.has(n)) : [],
    repeated: [...counts].filter(([, c]) => c > 1).map(([n]) => n),
    inHeadline: inHead, headline: document.querySelector("[data-testid=answer]").textContent,
    via: [...document.querySelectorAll("[data-testid=answer-chips] .via")].map((v) => v.textContent),
  };
}

async function visit(browser, width, index) {
  const seen = { width };
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  const consoleErrors = [];
  page.on("console", (msg) => { if (msg.type() === "error") consoleErrors.push(msg.text()); });
  page.on("pageerror", (err) => consoleErrors.push(String(err)));
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#health.ready", { timeout });
  if (flags.includes("--verify")) await page.check("input[name=mode][value=verify]");
  if (retriever) await page.selectOption("[data-testid=retriever-select]", retriever);
  const k = flagValue("--k");
  if (k) await page.fill("[data-testid=k-input]", k);
  await page.fill("[data-testid=query-input]", question);
  await page.click("[data-testid=submit]");
  try {  // the stages while they run (caught when they last long enough)
    await page.waitForSelector("[data-testid=progress] li", { timeout: 5000 });
    if (index === 0 && await page.evaluate(() => document.getElementById("result").hidden)) {
      await page.screenshot({ path: screenshot.replace(/(\.png)?$/, "-progress.png") });
      seen.progressShot = true;
    }
  } catch (_) { /* judged below from the timeline */ }
  await page.waitForFunction(() => {
    const answer = document.querySelector("[data-testid=answer]");
    const status = document.querySelector("[data-testid=status]");
    return (answer && answer.textContent.trim() && window.simgrag.graphs.length > 0) ||
           (status && status.classList.contains("error"));
  }, null, { timeout });
  if (await page.$("[data-testid=answer-set-more]")) await page.click("[data-testid=answer-set-more]");
  seen.status = await page.textContent("[data-testid=status]");
  seen.answer = (await page.textContent("[data-testid=answer]")).trim();
  Object.assign(seen, await page.evaluate(() => ({
    graphs: window.simgrag.graphs.map((cy) => ({
      entities: cy.nodes().map((n) => n.data("entity")),
      nodeLabels: cy.nodes().map((n) => n.data("label")),
      edgeLabels: cy.edges().map((e) => e.data("label")),
      rendered: cy.nodes().every((n) => n.renderedBoundingBox().w > 0),
    })),
    patternNodes: window.simgrag.pattern ? window.simgrag.pattern.nodes().map((n) => n.data("label")) : [],
    timingRows: document.querySelectorAll("[data-testid=timings] tr").length,
    iriLinks: [...document.querySelectorAll("#evidence a.iri")].map((a) => [a.textContent, a.getAttribute("href")]),
    substitution: document.querySelector("[data-testid=substitution]").hidden ? null
      : document.querySelector("[data-testid=substitution]").textContent,
    abstained: document.querySelector("[data-testid=answer]").classList.contains("abstained"),
    detail: document.querySelector("#answer-detail").textContent,
    answerSet: document.querySelector("[data-testid=answer-set]").hidden ? null : {
      chips: [...document.querySelectorAll("[data-testid=answer-chips] .chip")].map((c) => c.textContent),
      shapes: [...document.querySelectorAll("[data-testid=answer-shapes] li")].map((li) => li.textContent),
    },
    llmRan: window.simgragAnswer.llmRan(window.simgrag.last),
    stages: window.simgrag.timeline.filter((t) => t.what === "stage").map((t) => t.stage),
    progressFirst: (window.simgrag.timeline.find((t) => t.what === "stage") || {}).at,
    answerAt: (window.simgrag.timeline.find((t) => t.what === "answer") || {}).at,
    progressText: document.querySelector("[data-testid=progress]").innerText,
    mainWidth: document.querySelector("main").getBoundingClientRect().width,
  })));
  seen.measured = await page.evaluate(measureGraphs);
  seen.once = await page.evaluate(answerOnce);
  seen.consoleErrors = consoleErrors;
  await page.screenshot({ path: shotFor(width, index), fullPage: true });
  await page.close();
  return seen;
}

function judge(seen) {
  const first = seen.graphs[0];
  if (!first) return `no evidence graph was drawn (status: ${seen.status})`;
  if (!first.rendered) return "the evidence graph's nodes have no size on screen";
  const missing = expected.filter((name) => !first.entities.includes(name));
  if (missing.length) return `the evidence graph lacks ${missing.join(", ")}; it shows ${first.entities.join(", ")}`;
  if (retriever && retriever !== "simgrag") {
    if (seen.patternNodes.length) return `the ${retriever} retriever has no pattern, yet one was drawn`;
    if (first.edgeLabels.some((l) => !l)) return "an edge has no relation label";
  } else if (!first.edgeLabels.every((l) => /d=\d/.test(l)) || !first.nodeLabels.every((l) => /d=\d/.test(l))) {
    return "distances are missing from node or edge labels";
  }
  if (seen.consoleErrors.length) return "the page logged errors: " + seen.consoleErrors.join(" | ");
  for (const g of seen.measured) {
    if (g.minNodeLabelPx < MIN_LABEL_PX || (g.minEdgeLabelPx !== null && g.minEdgeLabelPx < MIN_LABEL_PX))
      return `${g.name}: labels drawn at ${g.minNodeLabelPx} / ${g.minEdgeLabelPx} px (< ${MIN_LABEL_PX}) at ${seen.width} px`;
    if (g.minLabelBoxHeight < MIN_LABEL_PX) return `${g.name}: a label's rendered box is ${g.minLabelBoxHeight} px high`;
    if (g.overlaps.length) return `${g.name} at ${seen.width} px: ${g.overlaps.slice(0, 3).join("; ")}`;
    if (g.clipped.length) return `${g.name} at ${seen.width} px: labels cut off by the box: ${g.clipped.join(", ")}`;
  }
  if (!seen.stages.length || !(seen.progressFirst < seen.answerAt))
    return `no stage progress was shown before the answer (stages: ${seen.stages.join(", ")})`;
  if (seen.mainWidth < 0.9 * (seen.width - 20)) return `the page uses ${seen.mainWidth} px of ${seen.width}`;
  if (!seen.llmRan && /\bLLM( reply| verdict)?:/.test(seen.detail)) return `"LLM:" printed with no LLM call: ${seen.detail}`;
  if (expectSubstitution && !(seen.substitution || "").includes(expectSubstitution))
    return `the page does not say "${expectSubstitution}" (it says: ${seen.substitution})`;
  if (expectAbstained && !(seen.abstained && /not found in the kg/i.test(seen.answer)))
    return `the page does not say "Not found in the KG" (answer: ${seen.answer})`;
  if (expectAbstained && !/nearest evidence/.test(seen.detail))
    return `the abstention comes without its nearest evidence (detail: ${seen.detail})`;
  if (expectAnswerSet !== null && (!seen.answerSet || seen.answerSet.chips.length !== Number(expectAnswerSet)))
    return `the answer set shows ${seen.answerSet ? seen.answerSet.chips.length : "no"} answers, expected ${expectAnswerSet}`;
  if (flags.includes("--expect-list-once")) {
    const once = seen.once;
    if (!once.names || once.missing.length || once.repeated.length || once.inHeadline.length || !/^\d+ /.test(once.headline))
      return `the list answer is not shown once: ${JSON.stringify(once)}`;
  }
  const via = flagValue("--expect-via");
  if (via && !seen.once.via.some((v) => v.includes(via))) return `no group "via ${via}" (groups: ${seen.once.via.join(" | ")})`;
  return null;
}

const browser = await chromium.launch({
  executablePath,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
});
let failure = null;
const visits = [];
try {
  for (const [i, width] of viewports.entries()) {
    const seen = await visit(browser, width, i);
    visits.push(seen);
    failure = judge(seen);
    if (failure) break;
  }
} catch (error) {
  failure = String(error);
} finally {
  await browser.close();
}
const report = { ok: failure === null, failure, ...(visits[0] || {}), viewports: visits.map((v) => ({
  width: v.width, mainWidth: v.mainWidth, graphs: v.measured, once: v.once, stages: v.stages })) };
console.log(JSON.stringify(report, null, 1));
process.exit(failure === null ? 0 : 1);
