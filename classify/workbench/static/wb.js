// classify workbench: keyboard coding and codebook search. Plain JavaScript, no dependencies,
// loaded from the app itself (CSP allows no other script).
"use strict";
(function () {
  const $ = (s) => document.querySelector(s);
  const $$ = (s) => Array.from(document.querySelectorAll(s));

  // codebook search: every page with a codebook
  const search = $("#cb-search");
  if (search) {
    search.addEventListener("input", () => {
      const q = search.value.trim().toLowerCase();
      $$(".cb-cat").forEach((li) => {
        li.hidden = q !== "" && !li.textContent.toLowerCase().includes(q);
      });
    });
  }

  const stateEl = $("#wb-state");
  if (!stateEl) return;
  const S = JSON.parse(stateEl.textContent);
  const picks = {}; // dim -> label (null: not shown); absent: not picked yet
  const order = []; // picked dims in order, for undo
  if (S.code) S.dims.forEach((d) => { picks[d.id] = S.code[d.id]; order.push(d.id); });
  const note = $("#note"), unsure = $("#unsure"), save = $("#save"), status = $("#status");
  note.value = S.note || "";
  unsure.checked = !!S.unsure;
  let buffer = "", timer = null, dirty = false;

  const current = () => S.dims.find((d) => !(d.id in picks));
  function draw() {
    S.dims.forEach((d) => {
      const el = $("#pick-" + d.id);
      el.textContent = d.id in picks ? (picks[d.id] === null ? "not shown" : picks[d.id]) : "–";
      el.classList.toggle("set", d.id in picks);
    });
    const cur = current();
    $$(".pick-row").forEach((r) => r.classList.toggle("current", !!cur && r.dataset.dim === cur.id));
    $$(".cb-dim").forEach((sec) => sec.classList.toggle("current", !!cur && sec.dataset.dim === cur.id));
    $$(".cb-cat").forEach((li) => li.classList.toggle("chosen", picks[li.dataset.dim] === li.dataset.cat));
    save.disabled = !!cur;
    if (cur) {
      const sec = $("#cb-" + cur.id);
      if (sec) sec.scrollIntoView({ block: "nearest" });
    }
    status.textContent = buffer ? "typed " + buffer + "…" : (dirty ? "unsaved" : "");
  }
  function pick(label) {
    const cur = current();
    if (!cur) return;
    picks[cur.id] = label;
    order.push(cur.id);
    dirty = true;
    draw();
  }
  function commitBuffer() {
    clearTimeout(timer);
    const cur = current();
    const k = parseInt(buffer, 10);
    buffer = "";
    if (cur && k >= 1 && k <= cur.categories.length) pick(cur.categories[k - 1]);
    else draw();
  }
  function digit(ch) {
    const cur = current();
    if (!cur) return;
    if (buffer === "" && ch === "0") { pick(null); return; }
    buffer += ch;
    const n = cur.categories.length;
    // wait for a second digit only while one could still follow (e.g. "1" of "12" with 15 categories)
    if (parseInt(buffer, 10) * 10 > n || buffer.length >= String(n).length) commitBuffer();
    else { clearTimeout(timer); timer = setTimeout(commitBuffer, 800); draw(); }
  }
  function undo() {
    if (buffer) { buffer = ""; draw(); return; }
    const d = order.pop();
    if (d) { delete picks[d]; dirty = true; draw(); }
  }
  async function submit() {
    if (buffer) commitBuffer();
    if (current()) { status.textContent = "pick every dimension first"; return; }
    save.disabled = true;
    status.textContent = "saving…";
    const r = await fetch("/api/items/" + encodeURIComponent(S.item) + "/codes", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      credentials: "same-origin",
      body: JSON.stringify({ coder: S.coder, labels: picks, note: note.value, unsure: unsure.checked }),
    });
    if (r.status === 201) {
      dirty = false;
      status.textContent = "saved";
      window.location.href = "/code";
    } else {
      const e = await r.json().catch(() => ({ error: r.statusText }));
      status.textContent = "not saved: " + e.error;
      save.disabled = false;
    }
  }
  function go(id) { if (id) window.location.href = "/code/" + encodeURIComponent(id); }

  save.addEventListener("click", submit);
  unsure.addEventListener("change", () => { dirty = true; draw(); });
  note.addEventListener("input", () => { dirty = true; });
  $$(".cb-cat").forEach((li) => li.addEventListener("click", () => {
    const cur = current();
    if (cur && cur.id === li.dataset.dim) pick(li.dataset.cat);
  }));
  const help = $("#help");
  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    const typing = t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type !== "checkbox"));
    if (ev.key === "Escape") { help.hidden = true; if (typing) t.blur(); return; }
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (/^[0-9]$/.test(ev.key)) { digit(ev.key); ev.preventDefault(); return; }
    switch (ev.key) {
      case "Enter": submit(); break;
      case "u": undo(); break;
      case "n": go(S.next); break;
      case "p": go(S.prev); break;
      case "?": help.hidden = !help.hidden; break;
      case "!": unsure.checked = !unsure.checked; dirty = true; draw(); break;
      case "e": note.focus(); break;
      case "/": if (search) search.focus(); break;
      default: return;
    }
    ev.preventDefault();
  });
  draw();
})();
