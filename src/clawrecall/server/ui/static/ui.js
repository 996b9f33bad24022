// Progressive enhancement only: every page works without this script.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
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
});
