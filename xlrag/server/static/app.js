// xlrag's web page: plain JavaScript, no build step, no dependency.
//
// Every string that comes from the corpus or a model (answers, passages, titles, ids, error
// messages) is put into the page with textContent or as a text node, never as markup: a
// passage that holds "<script>" shows those characters and runs nothing. The API key lives in
// this tab's sessionStorage (gone when the tab closes) and travels in a header only.
"use strict";

const KEY_STORE = "xlrag.apiKey";
const $ = (id) => document.getElementById(id);
const state = { key: sessionStorage.getItem(KEY_STORE) || "", settings: null, languages: [], sessionId: null,
                lastQuestion: null };

// -- small DOM helpers: text only ------------------------------------------------------------

// Control characters (a terminal's ESC sequences, a bell, C1 codes) shown as visible symbols:
// ESC as ␛, so "\x1b[2J" reads as the text it is. Newlines and tabs stay.
function visible(value) {
  return String(value).replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x20 ? String.fromCharCode(0x2400 + code) : code === 0x7f ? "\u2421" : "\ufffd";
  });
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = visible(value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(typeof child === "string" ? visible(child) : child);  // text nodes
  }
  return node;
}

const languageNames = new Intl.DisplayNames(["en"], { type: "language" });
function languageName(code) {
  try { return `${languageNames.of(code)} (${code})`; } catch { return String(code); }
}

// The writing direction of a language from the browser's own locale data (no list to keep):
// Arabic, Hebrew, Persian, Urdu... are rtl; an unknown code is left to the text ("auto").
function directionOf(lang) {
  try {
    const locale = new Intl.Locale(lang);
    const info = typeof locale.getTextInfo === "function" ? locale.getTextInfo() : locale.textInfo;
    return info && info.direction === "rtl" ? "rtl" : "ltr";
  } catch { return "auto"; }
}

function fmt(x) { return x === null || x === undefined ? "–" : Number(x).toFixed(3); }

// -- the API ---------------------------------------------------------------------------------

function headers(json) {
  const h = {};
  if (state.key) h.Authorization = `Bearer ${state.key}`;
  if (json) h["Content-Type"] = "application/json";
  return h;
}

class ApiError extends Error {
  constructor(status, type, message) { super(message); this.status = status; this.type = type; }
}

async function apiError(response) {
  let type = "error", message = `the server answered ${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) { type = body.error.type; message = body.error.message; }
  } catch { /* not the API's JSON: the status line says enough */ }
  return new ApiError(response.status, type, message);
}

async function call(method, path, body) {
  const response = await fetch(path, { method, headers: headers(body !== undefined),
                                       body: body === undefined ? undefined : JSON.stringify(body) });
  if (response.status === 401) { askForKey((await apiError(response)).message); throw new ApiError(401, "unauthorized", "the API key was refused"); }
  if (!response.ok) throw await apiError(response);
  return response;
}

// POST ``body`` and read the server-sent events as they come: on.start(response) first, then
// on.event(name, data) per event. Resolves when the stream ends; rejects if the connection
// breaks (the server went away), which the caller shows as a cut answer.
async function stream(path, body, on) {
  const response = await call("POST", path, body);
  on.start(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;  // a ping
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trim());
      }
      if (name) on.event(name, JSON.parse(data.join("\n")));
    }
  }
}

// -- the key ---------------------------------------------------------------------------------

function askForKey(message) {
  state.key = "";
  sessionStorage.removeItem(KEY_STORE);
  $("app").hidden = true;
  $("tabs").hidden = true;
  $("forget-key").hidden = true;
  $("key-panel").hidden = false;
  $("key-error").textContent = message || "";
  $("key-input").focus();
}

async function boot() {
  $("page-error").textContent = "";
  let response;
  try {
    response = await fetch("/v1/modes", { headers: headers(false) });
  } catch {
    $("page-error").textContent = "The server does not answer: is xlrag serve still running?";
    return;
  }
  if (response.status === 401) {
    // no key yet: the panel says what to do; a key that was given and refused: the API's sentence
    askForKey(state.key ? (await apiError(response)).message : "");
    return;
  }
  if (!response.ok) { $("page-error").textContent = (await apiError(response)).message; return; }
  state.settings = await response.json();
  const health = await (await fetch("/v1/health")).json();
  state.languages = health.index ? health.index.languages : [];
  $("server-status").textContent = `xlrag ${health.version} · ${state.languages.length} language stores`;
  $("key-panel").hidden = true;
  $("app").hidden = false;
  $("tabs").hidden = false;
  $("forget-key").hidden = !state.key;
  fillSettings();
}

// -- mode and languages ----------------------------------------------------------------------

function fillSettings() {
  const select = $("mode");
  select.replaceChildren(...state.settings.modes.map((m) => el("option", { value: m.name, text: m.name })));
  select.value = state.settings.default;
  describeMode();
  const box = $("langs");
  box.replaceChildren(box.querySelector("legend"));
  for (const code of state.languages) {
    box.append(el("label", {}, el("input", { type: "checkbox", value: code, "data-lang": code }), ` ${languageName(code)}`));
  }
}

function describeMode() {
  const mode = state.settings.modes.find((m) => m.name === $("mode").value);
  $("mode-desc").textContent = mode ? `${mode.name}: ${mode.description}` : "";
}

function chosenLangs() {
  return [...$("langs").querySelectorAll("input:checked")].map((i) => i.value);
}

// -- answers ---------------------------------------------------------------------------------

function addMessage(kind, text, dir) {
  const body = el("div", { class: "body", text });
  const node = el("div", { class: `msg ${kind}`, dir: dir || "auto" }, body);
  $("messages").append(node);
  node.scrollIntoView({ block: "end" });
  return node;
}

function setState(node, kind, text, detail) {
  node.querySelectorAll(":scope > .state, :scope > .state-detail").forEach((n) => n.remove());
  node.dataset.state = kind;
  node.append(el("div", { class: `state ${kind}`, text }));
  if (detail) node.append(el("div", { class: "detail state-detail", text: detail }));
}

// verified / repaired (what) / flagged (why): the server's own verdict, said plainly
function verification(answer, trace) {
  const repairs = (trace && trace.repairs) || [];
  if (!answer.verified) {
    const tried = repairs.length ? ` Tried: ${repairs.map((r) => r.repair).join(", ")}.` : "";
    return ["flagged", `flagged, not verified: ${answer.unverified.join(", ") || answer.flags.join(", ")}`,
            `Read the passages before relying on this answer.${tried}`];
  }
  if (repairs.length) {
    return ["repaired", `verified after repair: ${repairs.map((r) => r.repair).join(", ")}`,
            repairs.map((r) => `${r.repair}: ${r.detail}`).join("; ")];
  }
  return ["verified", "verified", answer.flags.length ? `flags: ${answer.flags.join(", ")}` : null];
}

// A passage of an answer, as the viewer shows it (the server's PassageOut, or a Hit of a perspective).
function passageOf(answer, marker) {
  const p = (answer.passages || [])[marker];
  if (!p) return null;
  // a Hit (perspectives) holds its Passage; the server's PassageOut is flat
  return p.passage ? { marker, doc_id: p.passage.doc_id, lang: p.passage.lang, title: p.passage.title, text: p.passage.text }
                   : { marker, doc_id: p.doc_id, lang: p.lang, title: p.title, text: p.text };
}

function chip(answer, citation) {
  const passage = citation.valid ? passageOf(answer, citation.marker) : null;
  const label = `doc${citation.marker}` + (passage ? ` · ${passage.lang}` : "");
  const b = el("button", { type: "button", class: "chip" + (passage ? "" : " invalid") +
                           (citation.source === "post_hoc" ? " post-hoc" : ""),
                           "data-marker": citation.marker, text: label,
                           title: passage ? `${passage.doc_id}: open the passage` : "cites no passage the model was shown" });
  if (passage) b.addEventListener("click", () => openPassage(answer, citation, passage, b));
  else b.disabled = true;
  return b;
}

// "<docN>" markers of a model's text become chips; everything else stays text.
function withChips(answer, text) {
  const out = [];
  const parts = String(text || "").split(/<doc(\d+)>/);
  parts.forEach((part, i) => {
    if (i % 2 === 0) { if (part) out.push(part); return; }
    const marker = Number(part);
    const citation = answer.citations.find((c) => c.marker === marker) || { marker, valid: false, source: "model" };
    out.push(chip(answer, citation));
  });
  return out;
}

function citationChips(answer) {
  const seen = new Set();
  const chips = [];
  for (const c of answer.citations) {
    const key = `${c.marker}/${c.valid}`;
    if (seen.has(key)) continue;
    seen.add(key);
    chips.push(chip(answer, c));
  }
  return chips;
}

function renderAnswer(node, reply) {
  const answer = reply.answer;
  node.dir = directionOf(answer.lang);
  node.dataset.lang = answer.lang;
  node.classList.remove("streaming");
  node.querySelector(".body").textContent = visible(answer.answer || "—");
  node.querySelectorAll(":scope > .explanation, :scope > .sources, :scope > .detail").forEach((n) => n.remove());
  if (answer.explanation) node.append(el("div", { class: "explanation" }, ...withChips(answer, answer.explanation)));
  const chips = citationChips(answer);
  node.append(el("div", { class: "sources" }, chips.length ? "Sources: " : "No citation.", ...chips));
  const t = reply.trace;
  const searched = t && t.original_question ? ` · searched as: ${t.question}` : "";
  node.append(el("div", { class: "detail", dir: "auto",
                          text: `${languageName(answer.lang)} · mode ${answer.mode}${t ? ` (${t.mode_reason})` : ""} · ${answer.model}${searched}` }));
  const [kind, text, detail] = verification(answer, t);
  setState(node, kind, text, detail);
}

// One question, streamed: the tokens as they come, then the checked answer. Anything but a
// stream that ends with its "done" event leaves the partial answer marked as cut.
async function ask(question) {
  const rel = chosenLangs();
  const mode = $("mode").value;
  addMessage("user", question, "auto");
  const node = addMessage("bot streaming", "", "auto");
  setState(node, "streaming", "answering…");
  let path, body;
  if (rel.length) {
    path = "/v1/ask";
    body = { question, mode, relevant_langs: rel, stream: true };
  } else {
    path = "/v1/chat";
    body = { question, mode, stream: true };
    if (state.sessionId) body.session_id = state.sessionId;
  }
  let attempt = 0, tokens = 0, finished = false, failure = null, sid = null;
  const text = node.querySelector(".body");
  try {
    await stream(path, body, {
      // a conversation exists once its first turn has ended: its id is kept only then
      start(response) { sid = response.headers.get("X-Session-Id"); },
      event(name, data) {
        if (name === "token") {
          if (data.attempt !== attempt) { attempt = data.attempt; text.textContent = ""; setState(node, "streaming", `repairing (attempt ${attempt})…`); }
          text.append(visible(data.text));
          node.dataset.tokens = String(++tokens);
        } else if (name === "answer") {
          renderAnswer(node, data);
        } else if (name === "done") {
          finished = true;
          if (sid) { state.sessionId = sid; $("session").textContent = `conversation ${sid.slice(0, 8)}`; }
        } else if (name === "error") {
          failure = data.error.message;
        }
      },
    });
  } catch (e) {
    if (e instanceof ApiError) {  // refused before any token: the server's own sentence
      node.classList.remove("streaming");
      text.textContent = "";
      if (e.type === "unknown_session") {  // dropped, or the server restarted: never continued silently
        state.sessionId = null;
        $("session").textContent = "";
        setState(node, "error", `${e.message}. Ask again: your next question starts a new conversation.`);
        return;
      }
      setState(node, "error", e.message);
      return;
    }
    failure = "the connection to the server broke";
  }
  if (!finished) {
    node.classList.remove("streaming");
    node.classList.add("cut");
    setState(node, "cut", "cut off: this answer is incomplete and was not checked",
             failure || "the server stopped before the end of the answer");
    return;
  }
  searchOnly(state.lastQuestion = question).catch(showPageError);
}

// -- the cited passage -----------------------------------------------------------------------

// The passage with the words it shares with what cites it marked (text nodes and <mark>s).
function marked(text, against) {
  const words = new Set((String(against || "").toLowerCase().match(/[\p{L}\p{N}]{3,}/gu)) || []);
  return String(text).split(/([\p{L}\p{N}]+)/u).map((part) =>
    words.has(part.toLowerCase()) ? el("mark", { text: part }) : visible(part));
}

function openPassage(answer, citation, passage, button) {
  document.querySelectorAll(".chip.open").forEach((c) => c.classList.remove("open"));
  if (button) button.classList.add("open");
  const box = $("passage");
  box.hidden = false;
  box.dataset.doc = passage.doc_id;
  $("passage-marker").textContent = passage.marker === null ? "" : `<doc${passage.marker}>`;
  $("passage-lang").textContent = languageName(passage.lang);
  $("passage-doc").textContent = visible(`document ${passage.doc_id}`);
  $("passage-title").textContent = visible(passage.title || "");
  $("passage-title").dir = directionOf(passage.lang);
  const how = citation.source === "retrieved" ? `retrieved at rank ${citation.rank}, not cited`
    : citation.source === "post_hoc" ? "attributed after the answer, by similarity (post hoc): it may not support the answer"
    : `cited by the answer (${citation.source})`;
  $("passage-cited").textContent = `${how}; the words it shares with the cited text are marked.`;
  const text = $("passage-text");
  text.dir = directionOf(passage.lang);
  text.replaceChildren(...marked(passage.text, citation.text || answer.answer));
  const translation = $("translation");
  translation.hidden = true;
  translation.textContent = "";
  $("translate-error").textContent = "";
  const target = answer.lang;
  const button2 = $("translate");
  button2.hidden = passage.lang === target;
  button2.textContent = `Translate into ${languageName(target)}`;
  button2.onclick = async () => {
    button2.disabled = true;
    $("translate-error").textContent = "";
    try {
      const r = await call("POST", "/v1/translate", { text: passage.text, source_lang: passage.lang, target_lang: target });
      const out = await r.json();
      translation.dir = directionOf(target);
      translation.textContent = visible(out.text);
      translation.hidden = false;
      // a piece too long for one reply stays in its own language: said, never passed off as translated
      if (!out.complete) $("translate-error").textContent = `Not all of it is translated: ${out.notes.join(" ")}`;
    } catch (e) {
      $("translate-error").textContent = e.message;
    } finally { button2.disabled = false; }
  };
}

// -- retrieval -------------------------------------------------------------------------------

// a retrieved passage opens in the viewer too, said to be retrieved, not cited
function hitButton(result, hit) {
  const b = el("button", { type: "button", class: "hit", text: hit.doc_id, title: "open the passage" });
  const passage = { marker: null, doc_id: hit.doc_id, lang: hit.lang, title: hit.title, text: hit.text };
  b.addEventListener("click", () => openPassage({ lang: result.lang || hit.lang, answer: "" },
                                                  { source: "retrieved", rank: hit.rank }, passage, null));
  return b;
}

async function searchOnly(question) {
  const mode = $("mode").value;
  const body = { question };
  // auto is the agent's choice, not an IR mode: retrieval then uses the server's retrieval.mode
  if (mode !== "auto") body.mode = mode;
  const rel = chosenLangs();
  if (rel.length) body.relevant_langs = rel;
  $("retrieval-summary").textContent = "searching…";
  const result = await (await call("POST", "/v1/retrieve", body)).json();
  const stores = {};
  for (const h of result.hits) (stores[h.store] = stores[h.store] || []).push(h);
  const notes = result.notes.length ? ` Notes: ${result.notes.join("; ")}` : "";
  $("retrieval-summary").textContent = `mode ${result.mode} · stores ${result.stores.join(", ") || "none"} · ` +
    `channels ${result.channels.join(", ")} · ${result.hits.length} passages.${notes}`;
  $("retrieval-stores").replaceChildren(...Object.entries(stores).map(([store, hits]) => el("div", { class: "store", "data-store": store },
    el("h3", { text: `${languageName(store)} store: ${hits.length}` }),
    el("table", {},
      el("thead", {}, el("tr", {}, ...["#", "document", "score", "dense", "lexical", "fused", "rerank", "found by"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...hits.map((h) => el("tr", { "data-doc": h.doc_id },
        el("td", { class: "num", text: h.rank }),
        el("td", { dir: "auto" }, hitButton(result, h), el("div", { class: "muted", text: h.title || "" })),
        el("td", { class: "num", text: fmt(h.score) }), el("td", { class: "num", text: fmt(h.dense_score) }),
        el("td", { class: "num", text: fmt(h.lexical_score) }), el("td", { class: "num", text: fmt(h.fused_score) }),
        el("td", { class: "num", text: fmt(h.rerank_score) }),
        el("td", {}, ...h.channels.map((c) => el("span", { class: "channel", text: c }))))))))));
}

// -- wiring ----------------------------------------------------------------------------------

function showPageError(e) { $("retrieval-summary").textContent = e.message; }

function showTab(name) {
  for (const tab of document.querySelectorAll(".tab")) tab.setAttribute("aria-selected", String(tab.dataset.tab === name));
  $("chat-view").hidden = name !== "chat";
  $("perspectives-view").hidden = name !== "perspectives";
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.key = $("key-input").value.trim();
    $("key-input").value = "";
    if (state.key) sessionStorage.setItem(KEY_STORE, state.key);
    boot();
  });
  $("forget-key").addEventListener("click", () => askForKey(""));
  $("mode").addEventListener("change", describeMode);
  $("ask-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = $("question").value.trim();
    if (!q) return;
    $("question").value = "";
    ask(q);
  });
  $("question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("ask-form").requestSubmit(); }
  });
  $("search-only").addEventListener("click", () => {
    const q = $("question").value.trim() || state.lastQuestion;
    if (q) searchOnly(q).catch(showPageError);
  });
  $("new-chat").addEventListener("click", () => {
    if (state.sessionId) call("DELETE", `/v1/chat/${encodeURIComponent(state.sessionId)}`).catch(() => {});
    state.sessionId = null;
    $("session").textContent = "";
    $("messages").replaceChildren();
  });
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showTab(tab.dataset.tab));
  $("persp-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = $("persp-question").value.trim();
    if (q) perspectives(q);
  });
  boot();
});
