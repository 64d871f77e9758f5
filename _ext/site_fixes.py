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
  tags (Font Awesome draws its icons with its script; the preloads were never used).
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx
from sphinx.builders.html._assets import _JavaScript
from sphinx.config import Config
from sphinx.environment import BuildEnvironment

TEMPLATES = Path(__file__).parent / "templates"


def _configure(app: Sphinx, config: Config) -> None:
    config.html_context.setdefault("default_mode", "auto")
    config.templates_path = [*config.templates_path, str(TEMPLATES)]


def _drop_duplicate_scripts(app: Sphinx, env: BuildEnvironment) -> None:
    scripts = getattr(app.builder, "_js_files", None)
    if scripts is None:  # not an HTML builder
        return
    unique = {}
    for js in scripts:
        js = _JavaScript(js.filename or "", priority=js.priority, **js.attributes)
        unique.setdefault(js, js)
    app.builder._js_files = list(unique)


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _configure)
    app.connect("env-updated", _drop_duplicate_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
