"""What the site says about the book beyond its text: its edition, its repository (only when
there is one), its version, date and licence, and its icon.

Two editions are built from the same sources: the instructor's (``make book``) and the
student edition (``make student``, whose overlay ``tools/student_config.yml`` sets
``book_edition: student``). Pages tell them apart with the tags ``edition_instructor`` and
``edition_student``, as in ``{only} edition_student``.

The repository rule. ``_config.yml`` names the repository once, as ``repository: url:``.
While that is the placeholder (``PLACEHOLDER``, or empty), nothing links to it: the
header's repository, "open an issue" and "suggest an edit" buttons and any launch button
are turned off, the tag ``has_repository`` is not set (the landing page then says how to
report an error without one), and the substitution ``{{ repository_url }}`` reads
"(not public yet)". Put the real address there and all of them follow.

Every page's footer gives the version (``pyproject.toml``), the build date
(``SOURCE_DATE_EPOCH`` when set, so that a rebuild can be reproduced, else today), the
licence (``LICENSE``, copied to the site as ``LICENSE.txt``) and a link to "how to cite"
on the landing page. The favicon is ``static/favicon.svg``; ``static/favicon.png``, the
same drawing, is copied to the site's root as ``favicon.ico`` for browsers that ask for one.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import tomllib
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

PLACEHOLDER = "https://github.com/positional-encoding-executed/book"
EDITIONS = ("instructor", "student")
STATIC = Path(__file__).parent / "static"
TEMPLATES = Path(__file__).parent / "templates"
REPOSITORY_BUTTONS = ("use_repository_button", "use_issues_button", "use_edit_page_button")
LAUNCH_URLS = ("binderhub_url", "jupyterhub_url", "colab_url", "deepnote_url")


def repository_is_real(url: str | None) -> bool:
    """The rule: a repository is linked to only when it is named and is not the
    placeholder."""
    url = (url or "").strip().rstrip("/")
    return bool(url) and url != PLACEHOLDER


def project_root(start: Path) -> Path | None:
    """The folder holding ``pyproject.toml``: the book's source folder or one above it
    (the student edition is built from a staging copy inside ``_build/``)."""
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    return None


def project_version(root: Path | None) -> str:
    if root is None:
        return "unknown"
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return data.get("project", {}).get("version", "unknown")


def build_date() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        when = _dt.datetime.fromtimestamp(int(epoch), tz=_dt.timezone.utc)
    else:
        when = _dt.datetime.now(tz=_dt.timezone.utc)
    return when.date().isoformat()


def _configure(app: Sphinx, config: Config) -> None:
    if config.book_edition not in EDITIONS:
        raise ValueError(
            f"book_edition is {config.book_edition!r}: set it to one of {EDITIONS} "
            "(tools/student_config.yml sets 'student')"
        )
    app.tags.add(f"edition_{config.book_edition}")
    options = config.html_theme_options
    url = options.get("repository_url", "")
    real = repository_is_real(url)
    if real:
        app.tags.add("has_repository")
    else:
        for button in REPOSITORY_BUTTONS:
            options[button] = False
        launch = dict(options.get("launch_buttons") or {})
        for key in LAUNCH_URLS:
            launch[key] = ""
        launch["thebe"] = False
        options["launch_buttons"] = launch
        # The theme builds edit and issue links from this: none without a repository.
        options.pop("repository_url", None)
    config.myst_substitutions = {
        **(config.myst_substitutions or {}),
        "repository_url": url.rstrip("/") if real else "(not public yet)",
        "book_version": project_version(project_root(Path(app.srcdir))),
    }
    # The footer: version, date, licence and "how to cite" (templates/book-footer.html).
    items = list(options.get("footer_content_items") or [
        "author.html", "copyright.html", "last-updated.html", "extra-footer.html"
    ])
    if "book-footer.html" not in items:
        items.append("book-footer.html")
    options["footer_content_items"] = items
    config.html_context = {
        **config.html_context,
        "book_version": project_version(project_root(Path(app.srcdir))),
        "book_build_date": build_date(),
        "book_edition": config.book_edition,
    }
    if str(TEMPLATES) not in config.templates_path:
        config.templates_path = [*config.templates_path, str(TEMPLATES)]
    if not config.html_favicon:
        config.html_favicon = str(STATIC / "favicon.svg")


def _copy_files(app: Sphinx, exc: Exception | None) -> None:
    if exc is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    root = project_root(Path(app.srcdir))
    if root is not None and (root / "LICENSE").is_file():
        shutil.copyfile(root / "LICENSE", out / "LICENSE.txt")
    # Browsers read a PNG named favicon.ico; the pages themselves link the SVG.
    shutil.copyfile(STATIC / "favicon.png", out / "favicon.ico")


def setup(app: Sphinx) -> dict:
    app.add_config_value("book_edition", "instructor", "env", [str])
    app.connect("config-inited", _configure, priority=400)  # before myst reads its config
    app.connect("build-finished", _copy_files)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
