// The outbox dashboard's live updates: every data-refresh milliseconds the
// page fetches its panels again (the same URL's "panels") and replaces each
// section that changed, so nothing reloads and a form being used stays.
"use strict";
(function () {
  const main = document.getElementById("panels");
  const live = document.getElementById("live");
  if (!main || !live) return;
  const every = Math.max(parseInt(main.dataset.refresh, 10) || 1000, 200);
  let busy = false;

  async function update() {
    if (busy) return;
    busy = true;
    try {
      const resp = await fetch("panels" + location.search, { credentials: "same-origin", cache: "no-store" });
      if (!resp.ok) throw new Error(resp.status + " " + resp.statusText);
      const tmpl = document.createElement("template");
      tmpl.innerHTML = await resp.text();
      swap(tmpl.content);
      live.textContent = "live · updated " + new Date().toLocaleTimeString();
      live.classList.remove("down");
    } catch (err) {
      live.textContent = "not updating: " + err.message + " (retrying)";
      live.classList.add("down");
    } finally {
      busy = false;
    }
  }

  // swap makes main's sections those of fresh, in fresh's order, keeping
  // the nodes of sections that did not change.
  function swap(fresh) {
    const next = Array.from(fresh.children).filter((s) => s.id);
    const keep = new Set(next.map((s) => s.id));
    for (const old of Array.from(main.children)) {
      if (!keep.has(old.id)) old.remove();
    }
    let before = main.firstElementChild;
    for (const s of next) {
      const old = document.getElementById(s.id);
      if (old && old.parentNode === main) {
        if (old.outerHTML !== s.outerHTML) {
          old.replaceWith(s);
          before = s.nextElementSibling;
        } else {
          before = old.nextElementSibling;
        }
        continue;
      }
      main.insertBefore(s, before);
      before = s.nextElementSibling;
    }
  }

  setInterval(update, every);
})();
