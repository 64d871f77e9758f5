"""The PDF of the whole book (``make pdf``, tools/pdf.py): ``_build/pdf/book.pdf``.

Its chapters are those of ``_toc.yml``, in order: the chapters numbered 1, 2, ... and
the back matter (the part that tools/pdf_config.yml names) lettered A, B, ... as
appendices, each with the title its page has. The PDF's outline (bookmarks) says so,
read here with a small parser of its object streams (no PDF package needed). Every
figure of the book is in it, and with ``pdftotext`` (Debian's poppler-utils) on PATH,
the glossary's Chinese terms are in its text. Without a PDF these tests are skipped,
saying why; ``REQUIRE_PDF=1`` (which .ci/run sets after ``make pdf``) turns that skip
into a failure. The configuration tests below need no PDF.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PDF = ROOT / "_build" / "pdf" / "book.pdf"
LOG = ROOT / "_build" / ".pdf-build" / "_build" / "latex" / "book.log"
sys.path.insert(0, str(ROOT / "tools"))

import pdf as pdf_tool  # noqa: E402


def _overlay() -> dict:
    return yaml.safe_load(pdf_tool.OVERLAY.read_text(encoding="utf-8"))


def _appendix_caption() -> str:
    return _overlay()["sphinx"]["config"]["latex_appendix_part"]


def _page(page: str) -> tuple[dict | None, str]:
    """A page of the toc: its notebook (None for a markdown file) and its markdown."""
    path = ROOT / page
    if path.with_suffix(".ipynb").exists():
        nb = json.loads(path.with_suffix(".ipynb").read_text(encoding="utf-8"))
        cells = [c for c in nb["cells"] if c["cell_type"] == "markdown"]
        return nb, "\n".join("".join(c["source"]) for c in cells)
    return None, path.with_suffix(".md").read_text(encoding="utf-8")


def _title(page: str) -> str:
    """The first level-1 heading of a page of the toc."""
    match = re.search(r"^# (.+)$", _page(page)[1], re.M)
    assert match, f"{page} has no level-1 heading"
    return match.group(1).strip()


def expected_chapters() -> list[tuple[str, str]]:
    """(number or letter, title) of each chapter of the toc, as the PDF numbers them."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    chapters, number, letter, appendix = [], 0, 0, False
    for part in toc["parts"]:
        appendix = appendix or part.get("caption") == _appendix_caption()
        for entry in part["chapters"]:
            if appendix:
                label, letter = chr(ord("A") + letter), letter + 1
            else:
                number += 1
                label = str(number)
            chapters.append((label, _title(entry["file"])))
    return chapters


def _plain(title: str) -> str:
    """A title as the outline shows it: no markdown code or math marks."""
    return " ".join(re.sub(r"[`$*]", "", title).split())


# ---- a small reader of the PDF's outline ---------------------------------------------

def _pdf_string(raw: bytes) -> str:
    """A PDF literal string's content (between its parentheses), decoded."""
    out, i = bytearray(), 0
    escapes = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}
    while i < len(raw):
        byte = raw[i:i + 1]
        if byte != b"\\":
            out += byte
            i += 1
            continue
        nxt = raw[i + 1:i + 2]
        octal = re.match(rb"[0-7]{1,3}", raw[i + 1:i + 4])
        if octal:
            out.append(int(octal.group(0), 8) & 0xFF)
            i += 1 + len(octal.group(0))
        else:
            out += escapes.get(nxt, nxt)
            i += 2
    if out.startswith(b"\xfe\xff"):
        return out[2:].decode("utf-16-be")
    return out.decode("latin-1")


def _objects(data: bytes) -> list[bytes]:
    """The PDF's own bytes and the content of each of its object streams (``/ObjStm``,
    Flate-compressed), where xdvipdfmx writes the outline."""
    parts = [data]
    for match in re.finditer(rb"<<[^>]*/Type\s*/ObjStm[^>]*>>\s*stream\r?\n", data):
        length = re.search(rb"/Length\s+(\d+)", match.group(0))
        end = match.end() + int(length.group(1)) if length else data.find(
            b"endstream", match.end()
        )
        parts.append(zlib.decompress(data[match.end():end]))
    return parts


TITLE = re.compile(
    rb"/Title\s*\(((?:\\.|[^\\)])*)\)\s*/A\s*<<\s*/S\s*/GoTo\s*/D\s*\(([^)]*)\)", re.S
)


def outline(data: bytes) -> dict[str, str]:
    """Destination name ("chapter.3", "appendix.B") -> outline title."""
    entries = {}
    for part in _objects(data):
        for match in TITLE.finditer(part):
            entries[match.group(2).decode("latin-1")] = _pdf_string(match.group(1))
    return entries


def image_count(data: bytes) -> int:
    """Image XObjects in the PDF, not counting the transparency masks of others."""
    images = set(re.findall(rb"(\d+) 0 obj\s*<<[^>]*?/Subtype\s*/Image", data))
    masks = set(re.findall(rb"/SMask (\d+) 0 R", data))
    return len(images - masks)


def book_figures() -> int:
    """Distinct images the toc's pages show: notebook outputs and markdown images."""
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    pages = re.findall(r"file:\s*(\S+)", toc) + [yaml.safe_load(toc)["root"]]
    seen = set()
    for page in pages:
        nb, text = _page(page)
        for cell in nb["cells"] if nb else []:
            for out in cell.get("outputs", []):
                png = out.get("data", {}).get("image/png")
                if png:
                    raw = base64.b64decode("".join(png))
                    seen.add(hashlib.sha256(raw).hexdigest())
        for image in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text):
            data = (ROOT / page).parent.joinpath(image).read_bytes()
            seen.add(hashlib.sha256(data).hexdigest())
    return len(seen)


@pytest.fixture(scope="module")
def book_pdf() -> bytes:
    if not PDF.exists():
        reason = (
            "no _build/pdf/book.pdf: run `make pdf` (it needs Debian's TeX Live; "
            "tools/pdf.py lists the packages)"
        )
        if os.environ.get("REQUIRE_PDF") == "1":
            pytest.fail(f"REQUIRE_PDF=1 but {reason}")
        pytest.skip(reason)
    return PDF.read_bytes()


# ---- the PDF -------------------------------------------------------------------------

def test_the_pdf_has_the_chapters_of_the_toc_numbered_as_there(book_pdf):
    found = outline(book_pdf)
    expected = expected_chapters()
    assert expected, "the toc lists no chapters"
    for label, title in expected:
        kind = "chapter" if label.isdigit() else "appendix"
        name = f"{kind}.{label}"
        assert name in found, (
            f"the PDF has no {kind} {label} ({title!r}); rebuild it with `make pdf`"
        )
        assert _plain(found[name]) == _plain(title), (
            f"{kind} {label} of the PDF is {found[name]!r}, the toc's is {title!r}"
        )


def test_the_pdf_has_no_chapter_the_toc_lacks(book_pdf):
    expected = {
        ("chapter." if label.isdigit() else "appendix.") + label
        for label, _ in expected_chapters()
    }
    extra = sorted(
        name for name in outline(book_pdf)
        if re.fullmatch(r"(chapter|appendix)\.\w+", name) and name not in expected
    )
    assert not extra, f"chapters in the PDF that the toc does not list: {extra}"


def test_every_figure_of_the_book_is_in_the_pdf(book_pdf):
    figures = book_figures()
    assert figures > 0, "the book's pages show no images at all: the count is broken"
    assert image_count(book_pdf) >= figures, (
        f"the book shows {figures} distinct images, the PDF holds "
        f"{image_count(book_pdf)}"
    )


def test_the_glossary_chinese_is_in_the_text_of_the_pdf(book_pdf):
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext not on PATH (Debian's poppler-utils)")
    text = subprocess.run(
        ["pdftotext", str(PDF), "-"], capture_output=True, check=True, text=True
    ).stdout
    glossary = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    terms = sorted(set(re.findall(r"^[\u4e00-\u9fff][^\n]*$", glossary, re.M)))
    assert terms, "the glossary has no line of Chinese: the pattern is broken"
    missing = [term for term in terms if term not in text]
    assert not missing, f"glossary terms in Chinese not in the PDF's text: {missing}"


def test_xelatex_had_a_glyph_for_every_character(book_pdf):
    if not LOG.exists():
        pytest.skip("no xelatex log next to the PDF (built elsewhere)")
    missing = pdf_tool.missing_glyphs(LOG)
    assert not missing, "characters without a glyph:\n" + "\n".join(missing)


# ---- the configuration (no PDF needed) -----------------------------------------------

def test_the_appendix_caption_is_a_part_of_the_toc():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    captions = [part.get("caption") for part in toc["parts"]]
    assert _appendix_caption() in captions, (
        f"tools/pdf_config.yml's latex_appendix_part {_appendix_caption()!r} is not a "
        f"caption of _toc.yml ({captions}); set it to the back matter's caption"
    )


def test_the_merged_config_keeps_the_book_and_finds_the_extensions():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    work = ROOT / "_build" / ".pdf-build"
    merged = pdf_tool.pdf_config(config, _overlay(), work)
    assert merged["title"] == config["title"], "the PDF keeps the book's title"
    assert merged["latex"]["latex_engine"] == "xelatex", "the PDF is typeset by xelatex"
    for name, folder in merged["sphinx"]["local_extensions"].items():
        assert (work / folder / f"{name}.py").resolve().exists(), (
            f"the merged config's folder {folder!r} for {name} is not _ext/"
        )
    assert set(config["sphinx"]["local_extensions"]) <= set(
        merged["sphinx"]["local_extensions"]
    ), "every extension of _config.yml is loaded in the PDF build too"


def test_pdf_string_decoding():
    assert _pdf_string(rb"Add or concatenate?") == "Add or concatenate?", "plain ASCII"
    assert _pdf_string(rb"a \(b\) \\c") == "a (b) \\c", "escaped parentheses, backslash"
    assert _pdf_string(rb"\376\377\003\240") == "\u03a0", "UTF-16 (octal escapes)"
