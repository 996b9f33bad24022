// Progressive enhancement only: every page works without this script.
"use strict";

// The list's first page, live: a memory stored anywhere (CLI, REST, an agent) appears at the top as it
// commits, from the signed-in caller's change feed (/ui/events: the scopes it may read). Text is set as
// text (textContent), never as HTML: stored text is untrusted.
function liveRows(status) {
  const rows = document.getElementById("rows");
  let added = 0;
  const stream = new EventSource(status.dataset.stream);
  stream.addEventListener("added", (event) => {
    const m = JSON.parse(event.data).memory;
    if (!m || m.kind !== "memory" || document.getElementById("row-" + m.id)) return;
    const row = document.createElement("li");
    row.className = "row new";
    row.id = "row-" + m.id;
    const link = document.createElement("a");
    link.className = "text";
    link.href = "/ui/m/" + encodeURIComponent(m.id) + "?scope=" + encodeURIComponent(m.scope);
    link.textContent = m.title || (m.content.length > 240 ? m.content.slice(0, 237) + "..." : m.content);
    const meta = document.createElement("span");
    meta.className = "meta";
    meta.textContent = [m.kind, m.scope, m.category, ...m.tags.map((t) => "#" + t),
                        m.created_at.slice(0, 16).replace("T", " ")].join(" · ");
    row.append(link, " ", meta);
    rows.prepend(row);
    for (const empty of document.querySelectorAll("p.empty")) empty.remove();
    added += 1;
    status.textContent = added === 1 ? "1 new memory since this page was loaded." : added + " new memories since this page was loaded.";
  });
  stream.addEventListener("error", () => { status.dataset.state = "reconnecting"; });
  stream.addEventListener("open", () => { status.dataset.state = "open"; });
}

// The insight page paints its frame at once and fills each part from its own page (/ui/insight/<part>),
// which the server drew and escaped: its #part is moved in as parsed nodes, no script runs from it.
async function fillPart(slot) {
  try {
    const response = await fetch(slot.dataset.part, { credentials: "same-origin" });
    if (!response.ok) throw new Error(response.status + " " + response.statusText);
    const drawn = new DOMParser().parseFromString(await response.text(), "text/html").getElementById("part");
    slot.replaceChildren(...drawn.childNodes);
  } catch (error) {
    slot.append(" (could not be drawn: " + error.message + ")");
  }
  slot.setAttribute("aria-busy", "false");
}

document.addEventListener("DOMContentLoaded", () => {
  for (const slot of document.querySelectorAll("[data-part]")) fillPart(slot);
  // A filter's select applies at once.
  for (const select of document.querySelectorAll(".filters select")) {
    select.addEventListener("change", () => select.form.requestSubmit());
  }
  // "/" focuses the first text field of the filters or the query, as on most search pages.
  document.addEventListener("keydown", (event) => {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
    if (event.key === "/" && !typing) {
      const field = document.querySelector("#q, .filters input");
      if (field) { event.preventDefault(); field.focus(); }
    }
  });
  const live = document.getElementById("live");
  if (live && window.EventSource) liveRows(live);
});
