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
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
WIDTHS = {"desktop": 1400, "phone": 390}
HEIGHT = 900
NOT_PAGES = ("_static", "_sources", "_images")
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


@pytest.mark.parametrize("page_path", PAGES)
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


# ---- Layout at every width (issue 21; rules in _ext/static/site.css, site.js) ----

# What the layout checks need from a page once its formulas are set: each figure's size
# and natural size, what overflows sideways (in the article), and the page's own width.
LAYOUT = """async () => {
  const art = document.querySelector("article.bd-article") || document.body;
  const images = [...art.querySelectorAll("img")];
  for (const img of images) img.loading = "eager";
  await Promise.all(images.map(img => img.complete ? null : new Promise(done => {
    img.addEventListener("load", done); img.addEventListener("error", done);
    setTimeout(done, 10000);
  })));
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  const visible = el => el.getClientRects().length > 0 && el.clientWidth > 0;
  const what = el => el.tagName.toLowerCase() + (el.className && el.className.baseVal
    === undefined && el.className ? "." + el.className.split(" ")[0] : "") + ": "
    + (el.textContent || "").trim().slice(0, 50);
  const overflowing = [];
  for (const el of art.querySelectorAll("*")) {
    if (!visible(el) || el.scrollWidth <= el.clientWidth + 1) continue;
    const style = getComputedStyle(el);
    const scrolls = ["auto", "scroll"].includes(style.overflowX);
    const kind = el.matches("pre, table, .pst-scrollable-table-container, dt.sig")
      || el.matches("mjx-container[display='true']");
    if (!scrolls && !kind) continue;
    const pre = el.matches("pre") || el.closest("pre");
    const math = el.matches("mjx-container");
    const table = el.matches("table, .pst-scrollable-table-container");
    overflowing.push({what: what(el), by: el.scrollWidth - el.clientWidth, scrolls,
      allowed: Boolean(pre || math || table), cue: el.dataset.scroll || null,
      mask: style.maskImage || style.webkitMaskImage || "none",
      tabindex: el.getAttribute("tabindex")});
  }
  return {
    pageWidth: document.documentElement.scrollWidth,
    viewport: document.documentElement.clientWidth,
    figures: images.filter(visible).map(img => ({src: img.getAttribute("src"),
      width: img.clientWidth, height: img.clientHeight,
      naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight})),
    overflowing,
  };
}"""

_layouts: dict[tuple[str, str], dict] = {}


def layout(contexts, width: str, page_path: str) -> dict:
    if page_path == PAGES[0] and not _pages():
        unavailable("the built site has no pages")
    key = (width, page_path)
    if key not in _layouts:
        page, errors = open_page(contexts, width, page_path)
        _layouts[key] = page.evaluate(LAYOUT)
        page.close()
    return _layouts[key]


def aspect_error(figure: dict) -> float:
    shown = figure["width"] / figure["height"]
    natural = figure["naturalWidth"] / figure["naturalHeight"]
    return abs(shown / natural - 1)


@pytest.mark.parametrize(("width", "page_path"), by_width(*PAGES))
def test_figures_keep_their_aspect(contexts, width, page_path):
    """A stored output's width and height became a fixed inline height: at 390 px the
    figures were squashed to half their height."""
    report = layout(contexts, width, page_path)
    figures = [f for f in report["figures"] if f["naturalWidth"]]
    squashed = [f"{f['src']}: shown {f['width']}x{f['height']}, natural "
                f"{f['naturalWidth']}x{f['naturalHeight']}"
                for f in figures if aspect_error(f) > 0.02]
    assert not squashed, (
        f"{page_path} at {WIDTHS[width]} px: figures whose shown aspect is off their "
        "natural aspect by over 2%:\n  " + "\n  ".join(squashed))


@pytest.mark.parametrize(("width", "page_path"), by_width(*PAGES))
def test_the_page_never_scrolls_sideways(contexts, width, page_path):
    report = layout(contexts, width, page_path)
    assert report["pageWidth"] <= report["viewport"] + 1, (
        f"{page_path} at {WIDTHS[width]} px is {report['pageWidth']} px wide: the page "
        f"scrolls sideways; {[o['what'] for o in report['overflowing']][:5]}")


@pytest.mark.parametrize("page_path", PAGES)
def test_nothing_scrolls_sideways_on_a_desktop(contexts, page_path):
    """At 1400 px code (at most 88 characters a line), tables, formulas and signatures
    fit."""
    wide = [f"{o['what']} (by {o['by']} px)"
            for o in layout(contexts, "desktop", page_path)["overflowing"]]
    assert not wide, (f"{page_path} at 1400 px: elements wider than their box:\n  "
                      + "\n  ".join(wide[:10]))


@pytest.mark.parametrize("page_path", PAGES)
def test_on_a_phone_only_code_math_and_tables_scroll(contexts, page_path):
    overflowing = layout(contexts, "phone", page_path)["overflowing"]
    others = [f"{o['what']} (by {o['by']} px)" for o in overflowing if not o["allowed"]]
    assert not others, (
        f"{page_path} at 390 px: elements other than code, formulas and tables wider "
        "than their box:\n  " + "\n  ".join(others[:10]))


@pytest.mark.parametrize("page_path", PAGES)
def test_what_scrolls_on_a_phone_shows_a_cue_and_takes_the_keyboard(
    contexts, page_path
):
    report = layout(contexts, "phone", page_path)
    scrolling = [o for o in report["overflowing"] if o["scrolls"]]
    no_cue = [o["what"] for o in scrolling if not o["cue"] or o["mask"] == "none"]
    assert not no_cue, (
        f"{page_path} at 390 px: boxes that scroll sideways with no faded edge "
        f"(site.js data-scroll, site.css mask): {no_cue[:5]}")
    no_key = [o["what"] for o in scrolling if o["tabindex"] is None]
    assert not no_key, (
        f"{page_path} at 390 px: boxes that scroll sideways but cannot take the "
        f"keyboard's focus (tabindex): {no_key[:5]}")


def test_the_layout_checks_see_figures_and_scrolling_boxes(contexts):
    """Guards the layout checks: they must have had figures and scrolling code to look
    at."""
    phone = [layout(contexts, "phone", p) for p in PAGES if p.startswith("book/")]
    figures = sum(len(r["figures"]) for r in phone)
    assert figures >= 20, f"only {figures} figures seen at 390 px"
    scrolling = sum(1 for r in phone for o in r["overflowing"] if o["scrolls"])
    assert scrolling >= 100, f"only {scrolling} sideways-scrolling boxes seen at 390 px"


def test_aspect_error_measures_a_squashed_figure():
    squashed = {"width": 342, "height": 315, "naturalWidth": 1353, "naturalHeight": 630}
    assert aspect_error(squashed) > 0.4, "a figure at half its height is off by half"
    kept = {"width": 342, "height": 159, "naturalWidth": 1353, "naturalHeight": 630}
    assert aspect_error(kept) < 0.02, "a figure scaled evenly keeps its aspect"


# ---- What the built pages say (read from the files; no browser) ---------------------

STUDENT_SITE = ROOT / "_build" / "student" / "html"
BACK_MATTER = ("instructors", "glossary", "api", "references")
CHAPTER_FILE = re.compile(r"^book/(\d\d)_\w+\.html$")
# The article's title: the first <h1> with a permalink (the print-only title has none).
H1 = re.compile(r"<h1>((?:(?!</h1>).)*?)<a class=\"headerlink\"", re.S)
TAG = re.compile(r"<[^>]+>")


def site_text(site: Path, page_path: str) -> str:
    return (site / page_path).read_text(encoding="utf-8")


def built(site: Path) -> Path:
    """The site, if built; the student edition is checked only where `make student`
    ran."""
    if not (site / "index.html").exists():
        reason = f"no built site at {site.relative_to(ROOT)}"
        if site == STUDENT_SITE:
            pytest.skip(reason + " (run `make student`)")
        unavailable(reason)
    return site


def editions() -> list:
    return [pytest.param(SITE, id="instructor"),
            pytest.param(STUDENT_SITE, id="student")]


def chapter_pages(site: Path) -> list[str]:
    pages = [p.relative_to(site).as_posix() for p in (site / "book").glob("*.html")]
    return sorted(p for p in pages if CHAPTER_FILE.match(p))


def heading(html_text: str) -> str:
    match = H1.search(html_text)
    return TAG.sub("", match.group(1)).strip() if match else ""


@pytest.mark.parametrize("site", editions())
def test_chapters_figures_and_exercises_are_numbered_by_chapter(site):
    """ "Chapter 7" is book/07_rope: its title reads "7. ...", its figures "Fig. 7.1",
    its exercises "Exercise 7.1", in both editions, as the text and the guide cite
    them."""
    site = built(site)
    pages = chapter_pages(site)
    assert len(pages) >= 10, f"only {pages} chapters in {site.relative_to(ROOT)}"
    landing = site_text(site, "book/index.html")
    for page_path in pages:
        number = int(CHAPTER_FILE.match(page_path).group(1))
        text = site_text(site, page_path)
        title = heading(text)
        assert title.startswith(f"{number}. "), f"{page_path}: its title is {title!r}"
        figures = re.findall(r'caption-number">Fig\. ([\d.]+) </span>', text)
        assert all(f.startswith(f"{number}.") for f in figures), (
            f"{page_path}: figures numbered {figures}, not {number}.k")
        exercises = re.findall(r'caption-number">Exercise ([\d.]+) </span>', text)
        assert exercises, f"{page_path} shows no numbered exercise"
        expected = [f"{number}.{k}" for k in range(1, len(exercises) + 1)]
        assert exercises == expected, (
            f"{page_path}: exercises {exercises}, not {expected}")
        link = re.escape(Path(page_path).name)
        menu = re.search(rf'href="{link}">(.*?)</a>', landing)
        assert menu, f"the landing page's menu has no link to {page_path}"
        assert TAG.sub("", menu.group(1)).startswith(f"{number}. "), (
            f"the menu does not number {page_path} {number}: {menu.group(1)!r}")


@pytest.mark.parametrize("site", editions())
def test_the_back_matter_is_not_numbered(site):
    site = built(site)
    for name in BACK_MATTER:
        path = site / "book" / f"{name}.html"
        if name == "instructors" and site == STUDENT_SITE:
            assert not path.exists(), "the student edition has no instructor's page"
            continue
        title = heading(path.read_text(encoding="utf-8"))
        assert not re.match(r"\d", title), f"book/{name}.html is numbered: {title!r}"


EXERCISE_BOX = re.compile(
    r'<div class="exercise admonition" id="([^"]+)">\s*'
    r'<p class="admonition-title">(.*?)</p>', re.S)


@pytest.mark.parametrize("site", editions())
def test_each_exercise_box_shows_its_label(site):
    """The label (ch07-rotate-by-hand) is the name the guide and the grader use."""
    site = built(site)
    boxes = [m for p in chapter_pages(site)
             for m in EXERCISE_BOX.finditer(site_text(site, p))]
    assert len(boxes) >= 40, f"only {len(boxes)} exercise boxes found"
    for match in boxes:
        label, title = match.groups()
        shown = re.search(r'class="exercise-label[^"]*"[^>]*>(.*?)</a>', title, re.S)
        assert shown, f"the box of {label} does not show its label"
        assert TAG.sub("", shown.group(1)).strip() == label, (
            f"the box of {label} shows {TAG.sub('', shown.group(1))!r}")


def test_solution_headers_link_without_a_leading_space():
    site = built(SITE)
    titles = [t for p in chapter_pages(site) for t in re.findall(
        r'<div class="solution[^"]*"[^>]*>\s*<p class="admonition-title">(.*?)</p>',
        site_text(site, p), re.S)]
    assert len(titles) >= 40, f"only {len(titles)} solution headers found"
    spaced = [t for t in titles if re.search(r"<a [^>]*>\s", t)]
    assert not spaced, f"solution headers whose link starts with a space: {spaced[:3]}"


def _site_meta():
    sys.path.insert(0, str(ROOT / "_ext"))
    import site_meta

    return site_meta


def configured_repository() -> str:
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return (config.get("repository") or {}).get("url", "")


def html_pages(site: Path) -> list[Path]:
    return [p for p in site.rglob("*.html")
            if not p.relative_to(site).as_posix().startswith(NOT_PAGES)]


@pytest.mark.parametrize("site", editions())
def test_no_page_links_to_a_repository_that_is_not_there(site):
    """While _config.yml names the placeholder, no page names it: no header buttons, no
    clone instruction, no launch button (the rule is _ext/site_meta.py's)."""
    site = built(site)
    url = configured_repository().rstrip("/")
    if _site_meta().repository_is_real(url):
        pytest.skip(f"_config.yml names a real repository, {url}")
    address = re.sub(r"^https?://", "", _site_meta().PLACEHOLDER)
    naming = [p.relative_to(site).as_posix() for p in html_pages(site)
              if address in p.read_text(encoding="utf-8")]
    assert not naming, f"pages that name the placeholder repository {address}: {naming}"


def test_the_repository_rule():
    meta = _site_meta()
    assert not meta.repository_is_real(meta.PLACEHOLDER), "the placeholder is not real"
    assert not meta.repository_is_real(meta.PLACEHOLDER + "/"), "nor with a slash"
    assert not meta.repository_is_real(""), "nor is no address"
    assert meta.repository_is_real("https://github.com/someone/book"), "another one is"


def project_version() -> str:
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return data["project"]["version"]


@pytest.mark.parametrize("site", editions())
def test_every_page_gives_version_date_licence_and_icon(site):
    site = built(site)
    version = project_version()
    assert (site / "LICENSE.txt").is_file(), "the licence is copied to the site"
    assert (site / "favicon.ico").is_file(), "favicon.ico at the root: no 404 for it"
    for path in html_pages(site):
        text = path.read_text(encoding="utf-8")
        if REDIRECT.search(text):
            continue
        name = path.relative_to(site).as_posix()
        footer = re.search(r'<p class="book-footer">(.*?)</p>', text, re.S)
        assert footer, f"{name} has no version line in its footer"
        line = " ".join(TAG.sub("", footer.group(1)).split())
        assert f"Version {version}" in line, f"{name}: the footer says {line!r}"
        assert re.search(r"built \d{4}-\d\d-\d\d", line), (
            f"{name}: no build date: {line!r}")
        assert "MIT" in line, f"{name}: no licence for the code: {line!r}"
        assert "CC BY 4.0" in line, f"{name}: no licence for the text: {line!r}"
        licence = re.search(r'href="([^"]*LICENSE\.txt)"', footer.group(1))
        assert licence, f"{name}: the footer does not link the licence"
        assert (path.parent / licence.group(1)).resolve().is_file(), (
            f"{name}: the licence link {licence.group(1)} leads nowhere")
        icon = re.search(r'<link rel="icon" href="([^"]+)"', text)
        assert icon, f"{name} names no favicon"
        assert (path.parent / icon.group(1)).resolve().is_file(), (
            f"{name}: its favicon {icon.group(1)} is missing")


@pytest.mark.parametrize("site", editions())
def test_pages_load_only_what_they_use(site):
    """No Font Awesome script (1.5 MB; the icons come from its CSS), no thebe while it
    is off, one viewport tag."""
    site = built(site)
    for path in html_pages(site):
        text = path.read_text(encoding="utf-8")
        if REDIRECT.search(text):
            continue
        name = path.relative_to(site).as_posix()
        assert "fontawesome/6.5.2/js/all.min.js" not in text, (
            f"{name} loads Font Awesome's JS")
        assert "sphinx-thebe" not in text, f"{name} loads thebe's files, which is off"
        assert "THEBE_JS_URL" not in text, f"{name} configures thebe, which is off"
        viewports = len(re.findall(r'<meta name="viewport"', text))
        assert viewports == 1, f"{name} has {viewports} viewport tags"


def test_the_root_redirect_has_a_link_to_follow():
    text = site_text(built(SITE), "index.html")
    assert REDIRECT.search(text), "the root index.html redirects to the landing page"
    assert re.search(r'<a href="book/index\.html">', text), "and links it too"
    assert "<title>" in text, "and has a title"


def test_header_icons_show_without_font_awesome_script(contexts):
    page, errors = open_page(contexts, "desktop", "book/07_rope.html")
    icons = page.evaluate("""async () => { await document.fonts.ready;
      return [...document.querySelectorAll(
          ".bd-header-article i, .bd-header-article span.fa-solid")]
        .map(i => ({cls: i.className, shown: i.getClientRects().length > 0,
          width: i.getBoundingClientRect().width,
          glyph: getComputedStyle(i, "::before").content,
          font: getComputedStyle(i).fontFamily}));
    }""")
    solid = page.evaluate(
        """() => document.fonts.check('900 16px "Font Awesome 6 Free"')""")
    page.close()
    shown = [i for i in icons if i["shown"]]
    assert len(shown) >= 3, f"the header shows only these icons: {icons}"
    blank = [i["cls"] for i in icons if i["glyph"] in ("none", "normal", '""')]
    assert not blank, f"header icons with no glyph: {blank}"
    empty = [i["cls"] for i in shown if i["width"] == 0]
    assert not empty, f"header icons drawn with no width: {empty}"
    assert solid, "Font Awesome's solid font is loaded (it draws the icons)"
    assert not errors, "\n".join(errors)


def test_buttons_have_names_that_contain_their_text(contexts):
    """axe's label-content-name-mismatch and button-name: copy buttons had no name, the
    search button a name without its visible "Ctrl+K"."""
    page, errors = open_page(contexts, "desktop", "book/07_rope.html")
    found = page.evaluate("""() => ({
      copy: [...document.querySelectorAll("button.copybtn")].map(
        b => b.getAttribute("aria-label")),
      search: [...document.querySelectorAll("button.search-button-field")].map(
        b => [b.getAttribute("aria-label"),
              b.textContent.replace(/\\s+/g, " ").trim()]),
      summaries: [...document.querySelectorAll("details summary[aria-label]")].length,
    })""")
    page.close()
    assert found["copy"], "the chapter has copy buttons"
    assert all(found["copy"]), "every copy button has an accessible name"
    assert found["search"], "the sidebar has a search button"
    for label, text in found["search"]:
        assert label is None or text in label, (
            f"the search button is named {label!r} but shows {text!r}")
    assert found["summaries"] == 0, "no summary has an aria-label hiding its text"
    assert not errors, "\n".join(errors)


CONTRAST = """() => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = c => { const [r, g, b] = c.slice(0, 3).map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const background = el => { for (; el; el = el.parentElement) {
    const c = rgb(getComputedStyle(el).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c; }
    return [255, 255, 255]; };
  return [...document.querySelectorAll(".bd-article table a")].map(a => {
    const [l1, l2] = [lum(rgb(getComputedStyle(a).color)), lum(background(a))];
    return {text: a.textContent.slice(0, 30),
            ratio: (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05)};
  });
}"""


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_links_in_tables_have_enough_contrast(browser, mode):
    """axe's color-contrast: links in striped rows were 4.3:1 (light), 4.0:1 (dark)."""
    context = browser.new_context(viewport={"width": 1400, "height": HEIGHT},
                                  color_scheme=mode)
    context.route("**/*", lambda route: route.continue_()
                  if route.request.url.startswith("file:") else route.abort())
    links = []
    for page_path in PAGES:
        if page_path.startswith("book/1"):
            page = context.new_page()
            page.goto((SITE / page_path).as_uri(), wait_until="load")
            links += [(page_path, link) for link in page.evaluate(CONTRAST)]
            page.close()
    context.close()
    assert len(links) >= 10, f"only {len(links)} links in tables to check"
    low = [f"{p}: {link['text']!r} {link['ratio']:.2f}:1" for p, link in links
           if link["ratio"] < 4.5]
    assert not low, (
        f"links in tables below 4.5:1 in {mode} mode:\n  " + "\n  ".join(low[:10]))


def test_glossary_marks_chinese_and_gives_it_anchors():
    text = site_text(built(SITE), "book/glossary.html")
    terms = re.findall(r'<dt id="([^"]+)">(.*?)<a class="headerlink"', text, re.S)
    chinese = [(i, t) for i, t in terms
               if re.search(r"[\u4e00-\u9fff]", TAG.sub("", t))]
    assert len(chinese) >= 40, f"only {len(chinese)} Chinese terms found"
    for anchor, term in chinese:
        assert re.search(r'<span lang="zh">[\u4e00-\u9fff]', term), (
            f"the term {TAG.sub('', term)!r} is not marked lang=\"zh\"")
        assert re.fullmatch(r"term-[A-Za-z0-9-]+-zh", anchor), (
            f"the term {TAG.sub('', term)!r} has the anchor #{anchor}")
    definitions = "".join(re.findall(r"<dd>(.*?)</dd>", text, re.S))
    links = re.findall(r'<a class="reference internal" href="#term-', definitions)
    assert len(links) >= 50, f"only {len(links)} links between the glossary's entries"


def test_the_student_landing_page_fits_its_edition():
    landing = site_text(built(STUDENT_SITE), "book/index.html")
    text = " ".join(TAG.sub(" ", landing).split())
    assert "solutions are folded away" not in text, "the student site has no solutions"
    assert "buttons at the top of each page" not in text, "nor error-report buttons"
    assert "student edition" in text, "it says it is the student edition"
    assert "To report an error" in text, "and how to report an error"
    for section in ("Prerequisites", "Chapters: objectives and time", "How to cite"):
        assert f"{section}" in text, f"the student landing page has no {section!r}"


def test_the_landing_page_says_how_to_report_an_error_and_cite():
    text = " ".join(TAG.sub(" ", site_text(built(SITE), "book/index.html")).split())
    assert "report an error" in text, "the landing page says how to report an error"
    assert "Prerequisites" in text, "it gives the prerequisites"
    code = TAG.sub("", site_text(built(SITE), "book/index.html"))
    assert "@book{positional_encoding_executed," in code, "and a BibTeX entry"


def test_search_from_disk_lists_results_without_errors(contexts):
    """Read from disk, the search cannot fetch pages for its snippets: it lists its
    results without them, with no console errors, and says so."""
    page = contexts["desktop"].new_page()
    errors = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    page.goto((SITE / "search.html").as_uri() + "?q=rope", wait_until="load")
    page.wait_for_selector("#search-results ul li", timeout=15_000)
    note = page.locator(".book-search-note").count()
    results = page.locator("#search-results ul li").count()
    page.close()
    assert results >= 5, f"the search for 'rope' listed {results} results"
    assert note == 1, "the search page says why it shows no snippets from disk"
    assert not errors, "\n".join(errors)
