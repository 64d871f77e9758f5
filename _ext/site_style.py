"""The reading layout: ``static/site.css`` and ``static/site.js`` on every page.

What they do, in short (each file says more): figures keep their aspect at every width, link
to their full-size image (with a badge on phones) and are dimmed in dark mode; code is sized
so that the book's 88-character lines fit the column, and what is longer wraps on a desktop;
API signatures, inline code and desktop tables wrap; what still scrolls sideways (code,
formulas and wide tables on a phone) fades at the edge that hides more and can be reached
with the keyboard; copy buttons get a name; the search page, read from disk, lists its
results without the snippets it cannot fetch.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx

STATIC = Path(__file__).parent / "static"


def _add_static_path(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _add_static_path)
    app.add_css_file("site.css", priority=900)  # after the theme's and the extensions'
    app.add_js_file("site.js", priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
