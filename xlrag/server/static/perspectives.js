// The perspectives tab of xlrag's web page: one column per language of sources, the verdict,
// and the same view through xlrag's own renderer. Uses app.js's helpers (el, call, chip...);
// like them, it puts corpus and model text in as text only.
"use strict";

// -- perspectives ----------------------------------------------------------------------------

function sideBlock(view, side) {
  const persp = view.perspectives.find((p) => p.lang === side.lang);
  const answer = persp && persp.answer;
  return el("div", { class: "side", "data-lang": side.lang },
    el("strong", { text: languageName(side.lang) }), " ", el("span", { dir: directionOf(view.lang), text: side.answer }), " ",
    ...(answer ? side.citations.map((c) => chip(answer, c)) : []));
}

async function perspectives(question) {
  const rel = chosenLangs();
  const body = { question };
  if (rel.length) body.relevant_langs = rel;
  $("persp-status").textContent = "answering once per language…";
  $("persp-columns").replaceChildren();
  $("persp-verdict").replaceChildren();
  $("persp-report-box").hidden = true;
  let view;
  try {
    view = await (await call("POST", "/v1/perspectives", body)).json();
  } catch (e) { $("persp-status").textContent = e.message; return; }
  const disputed = new Set(view.disagreements.flatMap((d) => d.sides.map((s) => s.lang)));
  const agreeing = new Set(view.consensus.flatMap((c) => c.langs));
  $("persp-status").textContent = `${view.status} · languages ${view.choice.langs.join(", ")}: ${view.choice.reason}` +
    (view.note ? ` · ${view.note}` : "");
  $("persp-columns").replaceChildren(...view.perspectives.map((p) => {
    const answer = p.answer;
    const shown = answer && answer.answer ? answer.answer : (p.note || p.status);
    const valid = answer ? answer.citations.filter((c) => c.valid) : [];
    return el("div", { class: "persp-col" + (disputed.has(p.lang) ? " disputed" : agreeing.has(p.lang) ? " agreeing" : ""),
                       "data-lang": p.lang },
      el("h3", { text: `${languageName(p.lang)} sources` }),
      el("div", { class: `state ${p.status === "answered" ? "verified" : "flagged"}`, text: p.status }),
      el("p", { dir: directionOf(view.lang), text: shown }),
      el("div", { class: "sources" }, valid.length ? "Sources: " : "No citation.",
         ...valid.filter((c, i) => valid.findIndex((d) => d.marker === c.marker) === i).map((c) => chip(answer, c))),
      answer && answer.flags.length ? el("div", { class: "detail", text: `flags: ${answer.flags.join(", ")}` }) : null);
  }));
  const verdict = [el("h2", { text: `Verdict: ${view.status}` })];
  for (const c of view.consensus) {
    verdict.push(el("div", { class: "group consensus" }, el("strong", { text: `Consensus of ${c.langs.join(", ")}` }),
                    el("div", { class: "detail", text: c.why_chosen }), sideBlock(view, c.chosen)));
  }
  for (const d of view.disagreements) {
    verdict.push(el("div", { class: "group disagreement" },
                    el("strong", { text: `Disagreement (${d.method}): ${d.reason}` }),
                    el("div", { class: "sides" }, ...d.sides.map((s) => sideBlock(view, s)))));
  }
  $("persp-verdict").replaceChildren(...verdict);
  try {  // the same view through xlrag's own renderer (xlrag.perspectives.render)
    // the renderer reads no trace and no passage text: sent without them, a view of many
    // languages stays far below the server's body limit
    const slim = { ...view, perspectives: view.perspectives.map((p) => ({ ...p, trace: null,
      answer: p.answer && { ...p.answer, passages: [] } })) };
    const md = await (await call("POST", "/v1/perspectives/report", { view: slim, format: "markdown" })).text();
    $("persp-report").textContent = visible(md);
    $("persp-report-box").hidden = false;
  } catch (e) { $("persp-status").textContent += ` (report: ${e.message})`; }
}
