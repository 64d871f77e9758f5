"""House rules for the book's notebooks, checked on the stored files.

nbval proves the stored outputs are what the code produces; these tests check the rest:
every chapter is in the table of contents, was executed top to bottom, shows no errors,
warnings or machine paths, installs nothing, and ends with 2 to 4 exercises with solutions.
"""

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
PLOT_TEXT = re.compile(r"set_title|set_xlabel|set_ylabel|title=|xlabel=|ylabel=|label=|ticklabels|suptitle|annotate|\.text\(")
LEAKS = [str(ROOT), str(Path.home()), tempfile.gettempdir(), sys.prefix, "site-packages"]


def cells(path, kind):
    return [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == kind]


def source(cell):
    return "".join(cell["source"])


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 5


def test_toc_lists_every_chapter_and_only_existing_files():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    listed = re.findall(r"file:\s*(\S+)", toc)
    for nb in NOTEBOOKS:
        assert f"book/{nb.stem}" in listed, f"{nb.name} is not in _toc.yml"
    for entry in listed:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".ipynb", ".md")), f"_toc.yml lists missing {entry}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_top_to_bottom(path):
    counts = [c["execution_count"] for c in cells(path, "code") if source(c).strip()]
    assert counts == list(range(1, len(counts) + 1)), f"{path.name}: re-run it with `make execute NB=book/{path.name}`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_are_clean(path):
    for i, cell in enumerate(cells(path, "code")):
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", f"{path.name} code cell {i} stored an error"
            assert out.get("name") != "stderr", f"{path.name} code cell {i} wrote to stderr: {out.get('text')}"
            text = json.dumps(out.get("text", "")) + json.dumps(out.get("data", {}).get("text/plain", ""))
            for leak in LEAKS:
                assert leak not in text, f"{path.name} code cell {i} shows a machine path"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_thin_and_offline(path):
    for i, cell in enumerate(cells(path, "code")):
        src = source(cell)
        assert not re.search(r"^\s*[!%]\s*(pip|conda)\b", src, re.M), f"{path.name} cell {i} installs packages"
        assert not re.search(r"urlopen|requests\.get|wget|curl|download", src), f"{path.name} cell {i} downloads"
        assert len(src.splitlines()) <= 25, f"{path.name} code cell {i} has {len(src.splitlines())} lines; move code to companion/"
        for line in src.splitlines():
            if PLOT_TEXT.search(line):
                assert not CJK.search(line), f"{path.name} cell {i} puts CJK text in a figure: {line.strip()}"
    assert path.stat().st_size < 3_000_000, f"{path.name} is too large; keep figures small"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_claims_are_checked(path):
    code = "\n".join(source(c) for c in cells(path, "code"))
    assert "assert" in code, f"{path.name} asserts nothing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_two_to_four_exercises_each_with_a_checked_solution(path):
    markdown = "\n".join(source(c) for c in cells(path, "markdown"))
    labels = re.findall(r"```\{exercise\}[^\n]*\n:label:\s*(\S+)", markdown)
    assert 2 <= len(labels) <= 4, f"{path.name} has {len(labels)} exercises"
    solved = re.findall(r"```\{solution-start\}\s*(\S+)", markdown)
    assert sorted(solved) == sorted(labels), f"{path.name}: exercises {labels} but solutions {solved}"
    code = "\n".join(source(c) for c in cells(path, "code"))
    assert code.count("check_") >= len(labels), f"{path.name}: every solution should call its checker"


def _chapters_importing(module):
    """The chapters whose code imports ``companion.<module>`` (any import form)."""
    pattern = re.compile(
        rf"\bcompanion\.{module}\b|from companion import (?:\([^)]*|[^\n]*)\b{module}\b"
    )
    return [nb.stem for nb in NOTEBOOKS if re.match(r"\d\d_", nb.name)
            and pattern.search("\n".join(source(c) for c in cells(nb, "code")))]


def test_the_api_page_says_which_chapters_use_each_module():
    """Each module's "Used in" line in book/api.md lists exactly the chapters importing it."""
    api = (ROOT / "book" / "api.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## .*`companion\.(\w+)`\n\n(Used in [^\n]*)?", api, re.M)
    assert len(sections) >= 15, "api.md's sections were not found"
    for module, line in sections:
        if module == "plotting":  # every chapter styles its figures with it
            continue
        listed = re.findall(r"\{doc\}`([^`]+)`", line.split(";")[0])
        assert listed == _chapters_importing(module), (
            f"api.md: the 'Used in' line of companion.{module} should list "
            f"{_chapters_importing(module)}, in order, before any ';'")


def test_chapters_are_numbered_and_the_back_matter_is_not():
    """Both editions number chapter 7 "7" (the text cites "chapter 7"): _toc.yml numbers
    every part of chapters; tools/student.py keeps its numbering."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc["parts"]:
        files = [Path(c["file"]).name for c in part["chapters"]]
        chapters = [f for f in files if re.match(r"\d\d_", f)]
        if chapters:
            name = part["caption"]
            assert chapters == files, f"part {name!r} mixes chapters and other pages"
            assert part.get("numbered") is True, f"part {name!r} is not numbered"
        else:
            assert not part.get("numbered"), f"{part['caption']!r} is numbered"


def _version():
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["project"]["version"]


def test_citation_file_gives_the_books_version():
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0", "CITATION.cff is in CFF 1.2.0"
    for key in ("message", "title", "authors"):
        assert cff.get(key), f"CITATION.cff lacks the required key {key!r}"
    assert str(cff["version"]) == _version(), "CITATION.cff gives pyproject's version"
    cited = cff["preferred-citation"]
    assert str(cited["version"]) == _version(), "and so does its preferred citation"
    assert set(cff["license"]) == {"MIT", "CC-BY-4.0"}, "it names the two licences"


def test_landing_page_bibtex_gives_the_books_version():
    landing = (ROOT / "book" / "index.md").read_text(encoding="utf-8")
    entry = re.search(r"```bibtex\n(@book\{.*?\n\})\n```", landing, re.S)
    assert entry, "book/index.md has a BibTeX entry under 'How to cite'"
    assert f"Version {_version()}" in entry.group(1), (
        f"the BibTeX entry gives version {_version()}, as pyproject.toml does")


def test_licence_names_both_licences():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in text, "LICENSE holds the MIT licence for the code"
    assert "CC BY 4.0" in text, "and names CC BY 4.0 for the text"
