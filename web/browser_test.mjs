// Browser test of the evidence page: headless Chromium (Debian's) driven by playwright-core.
//   node browser_test.mjs URL QUESTION EXPECTED_ENTITIES(comma-separated) SCREENSHOT.png [--verify] [--retriever=NAME]
//        [--expect-substitution=TEXT] [--expect-abstained] [--expect-answer-set=N]
// Opens the page, waits for the server to be ready, asks the question, waits for the answer, checks
// that the first evidence graph contains every expected entity (with distances on its nodes and
// edges; with another retriever than simgrag, no distances but no pattern either), saves a full-page
// screenshot and prints what it saw as JSON. Exit code 1 on failure.
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

const browser = await chromium.launch({
  executablePath,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
});
let failure = null;
const seen = {};
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
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
  await page.waitForFunction(() => {
    const answer = document.querySelector("[data-testid=answer]");
    const status = document.querySelector("[data-testid=status]");
    return (answer && answer.textContent.trim() && window.simgrag.graphs.length > 0) ||
           (status && status.classList.contains("error"));
  }, null, { timeout });
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
      head: document.querySelector("[data-testid=answer-set] strong").textContent,
      shapes: [...document.querySelectorAll("[data-testid=answer-shapes] li")].map((li) => li.textContent),
    },
  })));
  seen.consoleErrors = consoleErrors;
  await page.screenshot({ path: screenshot, fullPage: true });
  const first = seen.graphs[0];
  if (!first) failure = `no evidence graph was drawn (status: ${seen.status})`;
  else if (!first.rendered) failure = "the evidence graph's nodes have no size on screen";
  else {
    const missing = expected.filter((name) => !first.entities.includes(name));
    if (missing.length) failure = `the evidence graph lacks ${missing.join(", ")}; it shows ${first.entities.join(", ")}`;
    else if (retriever && retriever !== "simgrag") {
      if (seen.patternNodes.length) failure = `the ${retriever} retriever has no pattern, yet one was drawn`;
      else if (first.edgeLabels.some((l) => !l)) failure = "an edge has no relation label";
    } else if (!first.edgeLabels.every((l) => /d=\d/.test(l)) || !first.nodeLabels.every((l) => /d=\d/.test(l)))
      failure = "distances are missing from node or edge labels";
    else if (consoleErrors.length) failure = "the page logged errors: " + consoleErrors.join(" | ");
    if (!failure && expectSubstitution && !(seen.substitution || "").includes(expectSubstitution))
      failure = `the page does not say "${expectSubstitution}" (it says: ${seen.substitution})`;
    if (!failure && expectAbstained && !(seen.abstained && /not found in the kg/i.test(seen.answer)))
      failure = `the page does not say "Not found in the KG" (answer: ${seen.answer})`;
    if (!failure && expectAbstained && !/nearest evidence/.test(seen.detail))
      failure = `the abstention comes without its nearest evidence (detail: ${seen.detail})`;
    if (!failure && expectAnswerSet !== null && (!seen.answerSet || seen.answerSet.chips.length !== Number(expectAnswerSet)))
      failure = `the answer set shows ${seen.answerSet ? seen.answerSet.chips.length : "no"} answers, expected ${expectAnswerSet}`;
  }
} catch (error) {
  failure = String(error);
} finally {
  await browser.close();
}
console.log(JSON.stringify({ ok: failure === null, failure, ...seen }, null, 1));
process.exit(failure === null ? 0 : 1);
