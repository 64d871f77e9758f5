"""The built website, read as a reader reads it: in a real browser, from disk, with no network.

Every page of ``_build/html`` is opened in Chromium (Debian's ``chromium``, driven by Playwright
with ``executable_path``; Playwright's own browser download is not needed) at a desktop width
(1400 px) and a phone width (390 px), with every request that is not a local file aborted.
On each page: formulas are rendered by the bundled MathJax and no raw TeX shows, images load
and have alt text, and the console shows no errors. On a chapter: a solution dropdown opens,
and the chapter menu and page contents open at phone width.

This test builds nothing: run ``make book`` first, or ``make site-test``, which does both. It
skips, saying why, when Playwright, Chromium or the built site is missing; with
``REQUIRE_BROWSER=1`` (as in ``.ci/run``) a skip is a failure instead.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
WIDTHS = {"desktop": 1400, "phone": 390}
HEIGHT = 900
NOT_PAGES = ("_static", "_sources", "_images")
# The chapters whose figures are being redrawn with captions and alt text (issue 11).
FIGURES_IN_PROGRESS = ("book/11_", "book/12_", "book/13_")
IMAGE_FILE = re.compile(r"\.(png|jpe?g|gif|svg|webp)$", re.IGNORECASE)
# TeX that MathJax should have replaced: \( \) \[ \] $$ \begin{...}, or $...\macro...$.
REDIRECT = re.compile(r'<meta http-equiv="refresh"', re.IGNORECASE)
RAW_TEX = re.compile(r"\\[()\[\]]|\$\$|\\begin\{|\$[^$\s][^$]*\\[A-Za-z]+[^$]*\$")


def _pages() -> list[str]:
    pages = [p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")]
    return sorted(p for p in pages if not p.startswith(NOT_PAGES))


PAGES = _pages() or ["(no built site)"]


def unavailable(reason: str):
    """Skip with `reason`, or fail with it when REQUIRE_BROWSER=1 asks for the browser test."""
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (it is pinned in requirements.txt)")
    executable = chromium_path()
    if executable is None:
        unavailable("no Chromium on PATH (Debian: apt-get install -y chromium; or set CHROMIUM=/path)")
    if not (SITE / "index.html").exists():
        unavailable(f"no built site at {SITE.relative_to(ROOT)} (run `make book` or `make site-test`)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def contexts(browser):
    """One browser context per width; each aborts every request that is not a local file."""
    made = {}
    for name, width in WIDTHS.items():
        context = browser.new_context(viewport={"width": width, "height": HEIGHT})
        context.blocked = []
        context.route("**/*", lambda route, c=context: _local_only(route, c))
        made[name] = context
    yield made
    for context in made.values():
        context.close()


def _local_only(route, context):
    if route.request.url.startswith("file:"):
        route.continue_()
    else:
        context.blocked.append(route.request.url)
        route.abort()


def open_page(contexts, width: str, page_path: str):
    """Open a page and wait for MathJax; return it and a list that collects its console errors."""
    context = contexts[width]
    page = context.new_page()
    errors = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(f"console: {msg.text}"))
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    page.on("requestfailed", lambda req: req.url.startswith("file:") and errors.append(f"missing file: {req.url}"))
    context.blocked.clear()
    url = (SITE / page_path).as_uri()
    page.goto(url, wait_until="load")
    if REDIRECT.search((SITE / page_path).read_text(encoding="utf-8")):  # the root index.html
        page.wait_for_url(lambda now: now != url, wait_until="load")
    if page.locator(".math").count():
        try:
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=15_000)
            page.evaluate("() => MathJax.startup.promise")
        except Exception as exc:  # reported by the formula check, with what the page shows
            errors.append(f"MathJax did not start: {str(exc).splitlines()[0]}")
    errors.extend(f"network request (blocked): {url}" for url in context.blocked)
    return page, errors


# What a page shows once loaded: its formulas, stray TeX, and its images once all have loaded.
INSPECT = """async () => {
  const skip = "pre, code, script, style, textarea, mjx-container, .highlight";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.nodeValue.trim() && !n.parentElement.closest(skip)) texts.push(n.nodeValue);
  }
  const images = [...document.images];
  for (const img of images) img.loading = "eager";
  await Promise.all(images.map(img => img.complete ? null : new Promise(done => {
    img.addEventListener("load", done); img.addEventListener("error", done); setTimeout(done, 10000);
  })));
  const math = [...document.querySelectorAll(".math")];
  return {
    math: math.length,
    unrendered: math.filter(m => !m.querySelector("mjx-container")).map(m => m.textContent.slice(0, 80)),
    texErrors: [...document.querySelectorAll("mjx-merror")].map(e => e.textContent.slice(0, 80)),
    text: texts.join(" "),
    images: images.map(img => ({src: img.getAttribute("src"), alt: img.getAttribute("alt"),
                                 width: img.naturalWidth})),
  };
}"""

_visits: dict[tuple[str, str], dict] = {}


def visit(contexts, width: str, page_path: str) -> dict:
    """Open `page_path` at `width` once, and remember what it showed for the other checks."""
    if page_path == PAGES[0] and not _pages():
        unavailable("the built site has no pages")
    key = (width, page_path)
    if key not in _visits:
        page, errors = open_page(contexts, width, page_path)
        report = page.evaluate(INSPECT)
        page.close()
        report["errors"] = errors
        _visits[key] = report
    return _visits[key]


def alt_problem(alt: str | None) -> str | None:
    if alt is None or not alt.strip():
        return "no alt text"
    if IMAGE_FILE.search(alt.strip()) or (" " not in alt.strip() and "/" in alt):
        return f"alt text is a file path: {alt!r}"
    return None


def by_width(*page_params):
    return [(w, p) for w in WIDTHS for p in page_params]


@pytest.mark.parametrize(("width", "page_path"), by_width(*PAGES))
def test_no_console_errors_or_network(contexts, width, page_path):
    errors = visit(contexts, width, page_path)["errors"]
    assert not errors, f"{page_path} at {WIDTHS[width]} px:\n  " + "\n  ".join(errors)


@pytest.mark.parametrize(("width", "page_path"), by_width(*PAGES))
def test_formulas_render(contexts, width, page_path):
    report = visit(contexts, width, page_path)
    assert not report["unrendered"], f"{page_path}: formulas MathJax did not render: {report['unrendered'][:5]}"
    assert not report["texErrors"], f"{page_path}: TeX errors in formulas: {report['texErrors'][:5]}"
    raw = [m.group(0) for m in RAW_TEX.finditer(report["text"])]
    assert not raw, f"{page_path}: raw TeX visible in the text: {raw[:5]}"


@pytest.mark.parametrize(("width", "page_path"), by_width(*PAGES))
def test_images_load(contexts, width, page_path):
    broken = [img["src"] for img in visit(contexts, width, page_path)["images"] if img["width"] == 0]
    assert not broken, f"{page_path}: images that did not load: {broken}"


def _alt_param(page_path: str):
    if page_path.startswith(FIGURES_IN_PROGRESS):
        reason = "this chapter's figures are being redrawn with captions and alt text (issue 11)"
        return pytest.param(page_path, marks=pytest.mark.xfail(reason=reason, strict=False))
    return page_path


@pytest.mark.parametrize("page_path", [_alt_param(p) for p in PAGES])
def test_images_have_alt_text(contexts, page_path):
    problems = []
    for img in visit(contexts, "desktop", page_path)["images"]:
        problem = alt_problem(img["alt"])
        if problem:
            problems.append(f"{img['src']}: {problem}")
    assert not problems, f"{page_path}: {len(problems)} images without real alt text:\n  " + "\n  ".join(problems)


def test_some_pages_have_formulas(contexts):
    """Guards the formula check: it must have had formulas to look at."""
    with_math = [p for p in PAGES if visit(contexts, "desktop", p)["math"]]
    assert len(with_math) >= 5, f"only {with_math} have formulas"


def _first_page_with(marker: str) -> str:
    for page_path in PAGES:
        if page_path.startswith("book/") and marker in (SITE / page_path).read_text(encoding="utf-8"):
            return page_path
    unavailable(f"no built page has {marker!r}")


@pytest.mark.parametrize("width", WIDTHS)
def test_solution_dropdown_opens(contexts, width):
    from playwright.sync_api import expect

    page_path = _first_page_with('class="solution dropdown')
    page, errors = open_page(contexts, width, page_path)
    solution = page.locator("div.solution.dropdown").first
    body = solution.locator(":scope > :not(.admonition-title)").first
    solution.scroll_into_view_if_needed()
    expect(body).to_be_hidden()
    solution.locator("button.toggle-button").click()  # the title's middle may be a link to the exercise
    expect(body).to_be_visible()
    page.close()
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize(
    ("toggle", "sidebar"),
    [("button.primary-toggle", ".bd-sidebar-primary .bd-links"), ("button.secondary-toggle", ".bd-sidebar-secondary nav")],
    ids=["chapter menu", "page contents"],
)
def test_phone_menus_open(contexts, toggle, sidebar):
    from playwright.sync_api import expect

    page, errors = open_page(contexts, "phone", "book/01_why_order.html")
    link = page.locator(f"{sidebar} a").first
    expect(link).not_to_be_in_viewport()
    page.locator(toggle).first.click()
    expect(link).to_be_in_viewport()
    page.close()
    assert not errors, "\n".join(errors)


def test_desktop_sidebar_toggle_hides_the_chapter_menu(contexts):
    from playwright.sync_api import expect

    page, errors = open_page(contexts, "desktop", "book/01_why_order.html")
    link = page.locator(".bd-sidebar-primary .bd-links a").first
    expect(link).to_be_in_viewport()
    page.locator("button.primary-toggle").first.click()
    expect(link).not_to_be_in_viewport()
    page.close()
    assert not errors, "\n".join(errors)


def test_alt_problem_recognises_paths():
    assert alt_problem("../_images/3f2a.png") and alt_problem("") and alt_problem(None)
    assert alt_problem("_build/jupyter_execute/abc") and not alt_problem("Heatmap of the table: sin/cos bands")
