"""Keep the browser console of every page clean (tests/test_site.py checks it).

Three errors the pinned theme and Sphinx 7.4 print on every page, fixed at their source:

* ``Identifier 'THEBE_JS_URL' has already been declared``: inline scripts that an extension
  adds after the builder starts (sphinx-thebe's configuration, sphinx-togglebutton's selector)
  are registered twice by Sphinx 7.4, once with the file name ``None`` and once with ``""``,
  and the copies do not compare equal. This normalises the name and drops the duplicates
  before the pages are written.
* ``Got invalid theme mode: .``: the theme reads ``default_mode`` from ``html_context``, empty
  unless set; it is set to ``auto`` (follow the reader's system; the light/dark button still
  changes it).
* ``Access to font ... blocked by CORS policy`` when the site is read from disk:
  ``templates/layout.html`` drops the theme's ``<link rel="preload" as="font" crossorigin>``
  tags.

And what each page carries that it does not use:

* Font Awesome's script (1.5 MB): ``templates/layout.html`` drops it; the icons are drawn
  by Font Awesome's CSS and web fonts, which the theme loads anyway.
* sphinx-thebe's script, configuration and stylesheet, while thebe is off
  (``launch_buttons: thebe: false``).
* Two of the three viewport ``<meta>`` tags (``templates/layout.html``).

The site's root ``index.html`` is a redirect to the landing page; it gets a title and a link
to follow where the redirect does not happen.
"""

from __future__ import annotations

import html
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.builders.html._assets import _JavaScript
from sphinx.config import Config
from sphinx.environment import BuildEnvironment

TEMPLATES = Path(__file__).parent / "templates"


def _configure(app: Sphinx, config: Config) -> None:
    config.html_context.setdefault("default_mode", "auto")
    config.templates_path = [*config.templates_path, str(TEMPLATES)]


def _thebe_on(app: Sphinx) -> bool:
    launch = (app.config.html_theme_options or {}).get("launch_buttons") or {}
    return bool(launch.get("thebe")) or bool(getattr(app.config, "use_thebe", False))


def _is_thebe(asset) -> bool:
    return "thebe" in (asset.filename or "") or "THEBE_JS_URL" in asset.attributes.get(
        "body", ""
    )


def _drop_duplicate_scripts(app: Sphinx, env: BuildEnvironment) -> None:
    scripts = getattr(app.builder, "_js_files", None)
    if scripts is None:  # not an HTML builder
        return
    thebe = _thebe_on(app)
    unique = {}
    for js in scripts:
        js = _JavaScript(js.filename or "", priority=js.priority, **js.attributes)
        if thebe or not _is_thebe(js):
            unique.setdefault(js, js)
    app.builder._js_files = list(unique)
    if not thebe:
        app.builder._css_files = [
            css for css in app.builder._css_files if not _is_thebe(css)
        ]
        # The HTML builder adds the registry's assets again before writing.
        registry = app.registry
        registry.js_files = [
            (name, attrs) for name, attrs in registry.js_files
            if "thebe" not in (name or "") and "THEBE_JS_URL" not in attrs.get("body", "")
        ]
        registry.css_files = [
            (name, attrs) for name, attrs in registry.css_files if "thebe" not in name
        ]


REDIRECT = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<title>{title}</title>
<meta http-equiv="refresh" content="0; url={url}">
<link rel="canonical" href="{url}">
</head>
<body>
<p>The book starts at <a href="{url}">{url}</a>.</p>
</body>
</html>
"""


def _write_root_redirect(app: Sphinx, exc: Exception | None) -> None:
    """The root ``index.html`` that sphinx-external-toc would write (a bare
    meta refresh), with a title and a link to follow."""
    if exc is not None or app.builder.name != "html" or app.config.root_doc == "index":
        return
    url = f"{app.config.root_doc}.html"
    text = REDIRECT.format(
        lang=app.config.language or "en",
        title=html.escape(app.config.html_title or app.config.project),
        url=html.escape(url),
    )
    (Path(app.outdir) / "index.html").write_text(text, encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _configure)
    app.connect("env-updated", _drop_duplicate_scripts)
    # Before sphinx-external-toc's own (priority 500), which then leaves this one alone.
    app.connect("build-finished", _write_root_redirect, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
