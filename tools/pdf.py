"""Build the whole book as one PDF, typeset by xelatex: ``_build/pdf/book.pdf``.

    python tools/pdf.py            # what `make pdf` runs
    python tools/pdf.py --strict   # also fail on Sphinx warnings and missing glyphs

The configuration is ``_config.yml`` with the overlay ``tools/pdf_config.yml`` merged
over it (as ``tools/student.py`` does for the student edition), written to
``_build/.pdf-build/_config.yml``; Jupyter Book's ``pdflatex`` builder then writes the
LaTeX sources into ``_build/.pdf-build/_build/latex`` and runs xelatex there, and the
PDF is copied to ``_build/pdf/book.pdf``.

It needs TeX Live and three fonts from Debian's packages (``DEBIAN_PACKAGES`` below; 31
packages, about 360 MB installed, on Debian 12):

    apt-get install --no-install-recommends texlive-xetex texlive-fonts-recommended \\
        latexmk fonts-freefont-otf fonts-dejavu-core fonts-arphic-gbsn00lp poppler-utils

sphinx-jupyterbook-latex's document class loads the package ``bbm`` for seven macros
(``\\RR``, ``\\NN``, ...) that the book does not use; Debian ships ``bbm`` only in
``texlive-fonts-extra`` (1.7 GB), so the build supplies a stand-in ``bbm.sty`` that
defines ``\\mathbbm`` as ``\\mathbb`` (double-struck letters from the math font).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OVERLAY = ROOT / "tools" / "pdf_config.yml"
WORK = ROOT / "_build" / ".pdf-build"
OUT = ROOT / "_build" / "pdf" / "book.pdf"
DEBIAN_PACKAGES = (
    "texlive-xetex texlive-fonts-recommended latexmk fonts-freefont-otf "
    "fonts-dejavu-core fonts-arphic-gbsn00lp poppler-utils"
)
# The programs the build runs and the fonts tools/pdf_config.yml names, each with the
# Debian package that has it.
PROGRAMS = {"xelatex": "texlive-xetex", "latexmk": "latexmk", "make": "make"}
FONTS = {
    "FreeSerif": "fonts-freefont-otf",
    "DejaVu Sans Mono": "fonts-dejavu-core",
    "AR PL SungtiL GB": "fonts-arphic-gbsn00lp",
}

BBM_STANDIN = r"""\NeedsTeXFormat{LaTeX2e}
\ProvidesPackage{bbm}[2026/01/01 stand-in written by tools/pdf.py]
% The real package is only in Debian's texlive-fonts-extra; the double-struck letters
% of the math font (amssymb, then unicode-math) serve instead.
\providecommand{\mathbbm}[1]{\mathbb{#1}}
\providecommand{\mathbbmss}[1]{\mathbb{#1}}
\providecommand{\mathbbmtt}[1]{\mathbb{#1}}
"""


def merge(base: dict, overlay: dict) -> dict:
    """``base`` with ``overlay`` merged over it: dictionaries merged, the rest
    replaced."""
    result = dict(base)
    for key, value in overlay.items():
        result[key] = (
            merge(result[key], value)
            if isinstance(value, dict) and isinstance(result.get(key), dict)
            else value
        )
    return result


def pdf_config(config: dict, overlay: dict, config_dir: Path) -> dict:
    """The merged configuration, to be written into ``config_dir``."""
    merged = merge(config, overlay)
    sphinx = merged.setdefault("sphinx", {})
    # Jupyter Book resolves local extension folders against the config file's folder.
    local = sphinx.get("local_extensions") or {}
    sphinx["local_extensions"] = {
        name: os.path.relpath(ROOT / folder, config_dir) + "/"
        for name, folder in local.items()
    }
    # Files copied next to the .tex, named relative to the book's folder (Sphinx's).
    extra = sphinx.setdefault("config", {}).setdefault("latex_additional_files", [])
    extra.append((config_dir / "bbm.sty").relative_to(ROOT).as_posix())
    latex = merged.setdefault("latex", {}).setdefault("latex_documents", {})
    latex.setdefault("title", merged.get("title", "Book"))
    latex.setdefault("author", merged.get("author", ""))
    return merged


def check_programs() -> None:
    """Exit with the apt-get command if a program or a font the build needs is
    missing."""
    missing = [f"{p} ({pkg})" for p, pkg in PROGRAMS.items() if shutil.which(p) is None]
    if shutil.which("fc-list"):
        listed = subprocess.run(
            ["fc-list", ":", "family"], capture_output=True, text=True
        ).stdout
        families = {name.strip() for line in listed.splitlines()
                    for name in line.split(",")}
        missing += [f"the font {font} ({pkg})" for font, pkg in FONTS.items()
                    if font not in families]
    if missing:
        sys.exit(
            f"make pdf: missing {', '.join(missing)}. On Debian or Ubuntu: "
            f"apt-get install --no-install-recommends {DEBIAN_PACKAGES}"
        )


def missing_glyphs(log: Path) -> list[str]:
    """The "Missing character" lines of a LaTeX log, each once."""
    text = log.read_text(encoding="utf-8", errors="replace")
    return sorted(set(re.findall(r"Missing character: There is no .*", text)))


def build(strict: bool) -> Path:
    check_programs()
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    overlay = yaml.safe_load(OVERLAY.read_text(encoding="utf-8")) or {}
    latex_dir = WORK / "_build" / "latex"
    if latex_dir.exists():
        shutil.rmtree(latex_dir)  # xelatex's auxiliary files from an older book
    OUT.unlink(missing_ok=True)  # a failed build leaves no older PDF to be tested
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "bbm.sty").write_text(BBM_STANDIN, encoding="utf-8")
    merged = pdf_config(config, overlay, WORK)
    (WORK / "_config.yml").write_text(
        yaml.safe_dump(merged, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    command = [
        str(Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT),
        "--builder", "pdflatex", "--config", str(WORK / "_config.yml"),
        "--path-output", str(WORK), "--keep-going",
    ]
    if strict:
        command += ["--warningiserror", "--nitpick"]
    start = time.monotonic()
    result = subprocess.run(command)
    pdf = latex_dir / "book.pdf"
    if result.returncode != 0 or not pdf.exists():
        log = latex_dir / "book.log"
        where = f", and xelatex's log {log.relative_to(ROOT)}" if log.exists() else ""
        sys.exit(f"make pdf: the build failed; see above{where}")
    glyphs = missing_glyphs(latex_dir / "book.log")
    for line in glyphs:
        print(f"make pdf: {line}", file=sys.stderr)
    if strict and glyphs:
        sys.exit("make pdf: characters without a glyph in their font (above)")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(pdf, OUT)
    print(f"Built in {time.monotonic() - start:.0f} s")
    return OUT


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail on Sphinx warnings and on characters missing from the fonts",
    )
    args = parser.parse_args()
    out = build(args.strict)
    print(f"The PDF is at {out}")


if __name__ == "__main__":
    main()
