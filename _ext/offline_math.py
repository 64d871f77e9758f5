"""Serve MathJax from the built site itself, so formulas render with no network.

The `sphinx-mathjax-offline` package ships MathJax 3.2.2 whole (about 24 MB); its own Sphinx hook
copies all of it. This hook takes the MathJax files from that package but copies only what this
site loads (checked by tests/test_site.py, which blocks every request that is not a local file):

* ``tex-chtml.js``: the TeX input, the CommonHTML output, the menu and assistive MathML;
* ``output/chtml/fonts/woff-v2/``: the fonts CommonHTML draws with;
* ``input/tex/extensions/``: the TeX packages MathJax autoloads when a formula uses a macro the
  component lacks (``\\boldsymbol``, ``\\color``, ...), so a new formula does not break offline.

Left out: the other components (SVG and MathML input, the "full" bundles) and the speech and
exploration tools of the accessibility menu, whose rule sets alone are 4 MB.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

ENTRY = "tex-chtml.js"
KEEP = (ENTRY, "output/chtml/fonts/woff-v2", "input/tex/extensions")


def mathjax_source() -> Path:
    """The folder of MathJax files inside the installed `sphinx-mathjax-offline` package."""
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("sphinx-mathjax-offline is not installed (see requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax"


def copy_pruned(source: Path, target: Path) -> int:
    """Copy the files in KEEP from `source` to `target` (emptied first); return the bytes copied."""
    if target.exists():
        shutil.rmtree(target)
    for item in KEEP:
        if (source / item).is_dir():
            shutil.copytree(source / item, target / item)
        else:
            (target / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / item, target / item)
    return sum(f.stat().st_size for f in target.rglob("*") if f.is_file())


def _use_local_mathjax(app: Sphinx, config: Config) -> None:
    config.mathjax_path = f"mathjax/{ENTRY}"  # relative paths are resolved inside _static/


def _copy_mathjax(app: Sphinx, exc: Exception | None) -> None:
    if exc is None and app.builder.format == "html":
        copy_pruned(mathjax_source(), Path(app.outdir) / "_static" / "mathjax")


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _use_local_mathjax)
    app.connect("build-finished", _copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
