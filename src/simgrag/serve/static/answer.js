// The answer, said once, and the stages while it is being worked out.
// A single answer is the headline. A list (an answer set of 2 or more) is a count as the headline and
// the names once below it: the first ones, the rest one click away, grouped under the entity that links
// them to the question's named entity ("via Robert De Niro: …", read from each answer's witness
// triples). "LLM" is said only when the LLM wrote the answer or the verdict.
"use strict";

const FIRST_ANSWERS = 24;  // names shown before "show all"

// did the LLM answer (or verify)? the response's own flag when it has one, else its token counts
function llmRan(result) {
  for (const key of ["llm_called", "llm_used"]) if (typeof result[key] === "boolean") return result[key];
  return (result.prompt_tokens || 0) > 0 || (result.completion_tokens || 0) > 0 || Boolean(result.cached);
}

// "UNKNOWN movie 1" → "movies"
function plural(count, askedNode) {
  const type = String(askedNode || "").replace(/^UNKNOWN\s+/i, "").replace(/\s+\d+$/, "").trim() || "answer";
  if (count === 1) return type;
  if (/(s|x|ch|sh)$/i.test(type)) return type + "es";
  if (/[^aeiou]y$/i.test(type)) return type.slice(0, -1) + "ies";
  return type + "s";
}

// [{via: "Robert De Niro" | "", names: [...]}]: each answer under the entity of its witness next to an
// entity the question names (not the answer itself); groups in the order of their best answer.
function answerGroups(found) {
  const named = new Set();
  for (const group of found.groups || []) {
    for (const [node, entities] of Object.entries(group.nodes || {})) {
      if (!/^UNKNOWN\b/i.test(node.trim())) entities.forEach((e) => named.add(e));
    }
  }
  const witness = new Map((found.answers || []).map((a) => [a.entity, a]));
  const groups = new Map();
  for (const name of found.names) {
    const answer = witness.get(name);
    let via = "";
    if (answer) {  // the entity next to a named one links the answer to the question (the rest: in the chip's title)
      const between = (e) => e !== name && !named.has(e);
      const next = answer.triples.flatMap(([h, , t]) => (named.has(h) ? [t] : named.has(t) ? [h] : [])).filter(between);
      via = next[0] || answer.triples.flatMap(([h, , t]) => [h, t]).find(between) || "";
    } else if (witness.size) {
      via = "…";  // listed without its witness (past the first answers the server details)
    }
    if (!groups.has(via)) groups.set(via, []);
    groups.get(via).push(name);
  }
  return [...groups].map(([via, names]) => ({ via, names }));
}

// the first `limit` names (all: Infinity) as groups of chips
function answerList(groups, witness, limit) {
  const list = document.createElement("div");
  list.className = "answer-list";
  list.dataset.testid = "answer-chips";
  let left = limit;
  for (const group of groups) {
    if (left <= 0) break;
    const row = document.createElement("div");
    row.className = "answer-group";
    if (group.via) {
      const via = document.createElement("span");
      via.className = "via";
      via.textContent = group.via === "…" ? "others:" : `via ${group.via} (${group.names.length}):`;
      row.append(via);
    }
    for (const name of group.names.slice(0, left)) {
      const chip = document.createElement("span");
      chip.className = "chip";
      chip.textContent = name;
      const a = witness.get(name);
      if (a) chip.title = a.triples.map((t) => `(${t.join(", ")})`).join(" ") + ` · GSD ${Number(a.gsd).toFixed(3)}`;
      row.append(chip);
    }
    left -= group.names.length;
    list.append(row);
  }
  return list;
}

// The answer set (2 or more answers): count, tolerance, the grouped names (expandable), path shapes.
function showAnswerSet(result) {
  const box = document.getElementById("answer-set");
  const found = result.evidence && result.evidence.answer_set;
  box.replaceChildren();
  box.hidden = !isList(result);
  if (box.hidden) return;
  const head = document.createElement("div");
  const state = found.complete ? "" : found.capped ? " — capped: more matches exist" : " — search stopped at its deadline";
  head.className = "hint";
  head.textContent = `every ${plural(1, found.asked_node)} in a match within ${found.tolerance} of the best GSD `
    + `${Number(found.best_gsd).toFixed(3)} (${found.matches} match${found.matches === 1 ? "" : "es"})${state}`;
  const groups = answerGroups(found);
  const witness = new Map((found.answers || []).map((a) => [a.entity, a]));
  let list = answerList(groups, witness, FIRST_ANSWERS);
  box.append(list);
  if (found.names.length > FIRST_ANSWERS) {
    const more = document.createElement("button");
    more.type = "button";
    more.className = "more";
    more.dataset.testid = "answer-set-more";
    let all = false;
    const label = () => { more.textContent = all ? "show fewer" : `show all ${found.names.length}`; };
    label();
    more.addEventListener("click", () => {
      all = !all;
      const next = answerList(groups, witness, all ? Infinity : FIRST_ANSWERS);
      list.replaceWith(next);
      list = next;
      label();
    });
    box.append(more);
  }
  const shapes = document.createElement("details");
  shapes.dataset.testid = "answer-shapes";
  shapes.innerHTML = `<summary>${found.groups.length} path shape${found.groups.length === 1 ? "" : "s"} (evidence)</summary>`;
  const items = document.createElement("ul");
  for (const group of found.groups) {
    const item = document.createElement("li");
    item.textContent = `${group.line}  · ${group.matches} match${group.matches === 1 ? "" : "es"}, GSD ${Number(group.gsd).toFixed(3)}`;
    items.append(item);
  }
  shapes.append(items);
  box.append(head, shapes);
}

function isList(result) {
  const found = result.evidence && result.evidence.answer_set;
  return Boolean(found && found.size >= 2 && !result.abstained);
}

// The headline and the line under it: where the answer comes from, said once.
function showAnswer(mode, result) {
  const answer = document.getElementById("answer");
  const detail = document.getElementById("answer-detail");
  const ran = llmRan(result);
  const lines = [];
  if (mode === "verify") {
    answer.textContent = result.label;
    answer.className = "answer " + (result.label === "Supported" ? "supported" : result.label === "Refuted" ? "refuted" : "abstained");
    if (result.text) lines.push((ran ? "LLM verdict: " : "KG: ") + result.text);
  } else if (result.abstained) {
    answer.textContent = "Not found in the KG";
    answer.className = "answer abstained";
    if (result.text) lines.push("KG: " + result.text);
  } else if (isList(result)) {
    const found = result.evidence.answer_set;
    answer.textContent = `${found.size} ${plural(found.size, found.asked_node)}`;
    answer.className = "answer";
    lines.push(ran ? "the LLM read the evidence; the KG's answer set is listed below" : "from the KG, no LLM call");
  } else {
    const names = result.entities || [];
    answer.textContent = names.length ? names.join(", ") : (result.short_answer || result.text);
    answer.className = "answer";
    if (ran && result.text) lines.push("LLM reply: " + result.text);
    else if (!ran) lines.push("from the KG, no LLM call");
  }
  const notice = document.getElementById("notice");
  const subs = (mode === "verify" ? [] : result.substitutions) || [];
  notice.hidden = !subs.length;
  notice.textContent = subs.map((s) => `${s.text} (distance ${Number(s.distance).toFixed(3)}; ${s.why || "the KG has no entity named '" + s.pattern_node + "'"})`).join("\n");
  if (result.exact_match === true) lines.push("exact match: the KG holds the pattern, and the pattern reads the whole question");
  if (result.reason) lines.push("why: " + result.reason);
  if (result.pattern_attempts > 1) lines.push(`pattern took ${result.pattern_attempts} attempts`);
  detail.textContent = lines.join("\n");
  const more = result.reason_details;  // calibration numbers and the like: there on request
  if (more && (typeof more === "string" ? more.trim() : Object.keys(more).length)) {
    const toggle = document.createElement("details");
    toggle.className = "reason-details";
    toggle.innerHTML = "<summary>details</summary><pre></pre>";
    toggle.children[1].textContent = typeof more === "string" ? more : JSON.stringify(more, null, 1);
    detail.append(toggle);
  }
}

// The stages of one request as they happen (NDJSON events of /v1/ask or /v1/verify with "stream").
class Progress {
  constructor(list) {
    this.list = list;
    this.started = performance.now();
    this.current = null;
    this.timer = null;
    list.replaceChildren();
    list.hidden = false;
    window.simgrag.timeline = [];
  }

  stage(event) {
    this.finish(event.elapsed_s);
    const item = document.createElement("li");
    item.className = "running";
    item.dataset.stage = event.stage;
    item.innerHTML = "<span class=\"label\"></span> <span class=\"time\"></span>";
    item.children[0].textContent = event.label;
    this.list.append(item);
    this.current = { item, from: event.elapsed_s, at: performance.now() };
    window.simgrag.timeline.push({ what: "stage", stage: event.stage, at: performance.now() });
    this.tick();
    clearInterval(this.timer);
    this.timer = setInterval(() => this.tick(), 100);
  }

  tick() {
    if (!this.current) return;
    const seconds = this.current.from + (performance.now() - this.current.at) / 1000;
    this.current.item.children[1].textContent = `${seconds.toFixed(1)} s`;
  }

  finish(elapsed) {
    clearInterval(this.timer);
    if (!this.current) return;
    const { item, from } = this.current;
    const seconds = Math.max(0, (elapsed != null ? elapsed : from + (performance.now() - this.current.at) / 1000) - from);
    item.className = "done";
    item.children[1].textContent = seconds >= 1 ? `${seconds.toFixed(1)} s` : `${Math.round(seconds * 1000)} ms`;
    this.current = null;
  }
}

window.simgragAnswer = { llmRan, plural, answerGroups, showAnswer, showAnswerSet, Progress };
