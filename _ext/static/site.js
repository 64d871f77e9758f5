// The reading layout's script (_ext/site_style.py registers it; site.css has the styles).
//
// * What scrolls sideways (code, wide tables, long formulas) gets data-scroll = "start",
//   "middle" or "end" (site.css fades the edge that hides more) and tabindex="0", so that
//   a keyboard can scroll it too.
// * A display formula a little wider than the column is set a little smaller (down to 80%)
//   so that it fits; a wider one scrolls.
// * Copy buttons get an accessible name; the summaries of folded cells lose an aria-label
//   that did not contain their visible text.
// * Read from disk (file://), the search page cannot fetch the pages it would quote, so it
//   lists them without snippets (instead of blank ones and console errors) and says so.
"use strict";

(() => {
  const fromDisk = window.location.protocol === "file:";
  // documentation_options.js declares it with const: not a property of window.
  if (fromDisk && typeof DOCUMENTATION_OPTIONS !== "undefined") {
    DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
  }

  const SCROLLERS = [
    ".bd-article pre",
    ".bd-article .pst-scrollable-table-container",
    ".bd-article .table-wrapper",
    ".bd-article mjx-container[display='true']",
  ].join(", ");
  const MIN_MATH_SCALE = 0.8;

  function fitFormula(el) {
    if (el.dataset.fitted) return;
    const wide = el.scrollWidth, room = el.clientWidth;
    if (!room || wide <= room + 1) return;
    const scale = room / wide;
    if (scale < MIN_MATH_SCALE) return;
    const size = parseFloat(getComputedStyle(el).fontSize);
    el.style.fontSize = `${Math.floor(size * scale * 0.98 * 100) / 100}px`;
    el.dataset.fitted = "1";
  }

  function mark(el) {
    const hidden = el.scrollWidth - el.clientWidth;
    if (el.clientWidth === 0 || hidden <= 1) {
      delete el.dataset.scroll;
      return;
    }
    if (!el.hasAttribute("tabindex")) el.setAttribute("tabindex", "0");
    const left = el.scrollLeft;
    el.dataset.scroll = left <= 1 ? "start" : left >= hidden - 1 ? "end" : "middle";
  }

  const watched = new WeakSet();
  const resizes = "ResizeObserver" in window ? new ResizeObserver((entries) => {
    for (const entry of entries) mark(entry.target);
  }) : null;

  function markAll() {
    for (const el of document.querySelectorAll(".bd-article mjx-container[display='true']")) {
      fitFormula(el);
    }
    for (const el of document.querySelectorAll(SCROLLERS)) {
      mark(el);
      if (!watched.has(el)) {
        watched.add(el);
        el.addEventListener("scroll", () => mark(el), { passive: true });
        if (resizes) resizes.observe(el);
      }
    }
  }

  function nameButtons() {
    for (const button of document.querySelectorAll("button.copybtn:not([aria-label])")) {
      button.setAttribute("aria-label", "Copy to clipboard");
    }
    for (const summary of document.querySelectorAll("details summary[aria-label]")) {
      summary.removeAttribute("aria-label");
    }
  }

  function noteSearchFromDisk() {
    const results = document.getElementById("search-results");
    if (!fromDisk || !results || document.querySelector(".book-search-note")) return;
    const note = document.createElement("p");
    note.className = "book-search-note";
    const command = document.createElement("code");
    command.textContent = "make serve";
    note.append(
      "This page was opened from disk, where the search lists the pages it finds " +
      "without quoting them. Served over HTTP (", command, " in the book's source " +
      "folder), it quotes the text around each match.");
    results.parentNode.insertBefore(note, results);
  }

  function ready() {
    nameButtons();
    noteSearchFromDisk();
    markAll();
    // MathJax typesets after the page loads, and copy buttons come with copybutton.js.
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(markAll);
    }
    window.addEventListener("load", () => { nameButtons(); markAll(); });
    window.addEventListener("resize", markAll, { passive: true });
    document.addEventListener("toggle", markAll, true);  // a folded cell opened
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
