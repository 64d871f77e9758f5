"""The exercise registry, the student edition's stripper, and the leak check.

The leak check builds the student notebooks into ``_build/student/notebooks`` (as
``make student`` does, without the website: a few seconds) and then scans every file under
``_build/student``, the website too if ``make student`` built one. Set ``STUDENT_HTML=1`` to
also build the website here first (about 40 s more).
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import student  # noqa: E402
from companion.exercises import Feedback  # noqa: E402
from companion.exercises.registry import CHAPTERS, EXERCISES  # noqa: E402

NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
STUDENT = ROOT / "_build" / "student"
LABEL = re.compile(r"```\{exercise\}[^\n]*\n(?::[^\n]*\n)*?:label:\s*(\S+)")


def book_labels() -> dict[str, str]:
    labels = {}
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                for label in LABEL.findall("".join(cell["source"])):
                    labels[label] = path.stem
    return labels


# ---- the registry ---------------------------------------------------------------------------------

def test_every_exercise_of_the_book_is_registered_and_nothing_else():
    labels = book_labels()
    missing = sorted(set(labels) - set(EXERCISES))
    assert not missing, (f"exercises not in companion/exercises/registry.py: {missing}; add one line "
                         "per exercise there (the module's docstring says how)")
    stale = sorted(set(EXERCISES) - set(labels))
    assert not stale, f"registry entries with no exercise in book/: {stale}"
    for label, chapter in labels.items():
        assert EXERCISES[label].chapter == chapter, f"{label} is in {chapter}.ipynb"


def test_chapters_table_matches_the_notebooks():
    assert sorted(CHAPTERS.values()) == [p.stem for p in NOTEBOOKS]


def _statement(label: str) -> str:
    nb = json.loads((ROOT / "book" / f"{EXERCISES[label].chapter}.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and re.search(rf":label:\s*{re.escape(label)}\s", text):
            block = text[text.index("{exercise}"):]
            return block[:block.index("```", 3)]
    raise AssertionError(f"no statement for {label}")


PENDING = set()  # every statement names what the grader reads


@pytest.mark.parametrize("label", [pytest.param(label, marks=pytest.mark.xfail(
    reason="statement to gain 'Store it in `answer`.' (chapter author)", strict=False))
    if label in PENDING else label for label in EXERCISES])
def test_statement_names_what_the_grader_reads(label):
    """The statement says "store it in `answer`" (or defines the function `probe(...)`)."""
    text = _statement(label)
    for name in EXERCISES[label].names:
        assert re.search(rf"(in|as|Write|function|write)\s+`{name}[`(]", text), (
            f"{label}: the statement should say where the answer goes, e.g. 'Store it in `{name}`'")


def test_every_checker_rejects_the_stub():
    """An untouched stub (``answer = ...`` or a function returning None) scores nothing."""
    for ex in EXERCISES.values():
        value = (lambda *args, **kwargs: None) if ex.function else Ellipsis
        feedback = ex.checker(*[value] * len(ex.names))
        assert isinstance(feedback, Feedback) and not feedback, ex.label


# ---- the stripper ---------------------------------------------------------------------------------

def _md(text):
    return nbformat.v4.new_markdown_cell(text)


def _code(text, outputs=()):
    cell = nbformat.v4.new_code_cell(text)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in outputs]
    return cell


def test_stripper_replaces_each_solution_by_a_stub_and_a_checker_call():
    nb = nbformat.v4.new_notebook(cells=[
        _code("x = 1"),
        _md("## Exercises\n\n```{exercise}\n:label: ch03-pe-row\nCompute it. Store it in `answer`.\n```\n\n"
            "```{solution-start} ch03-pe-row\n:class: dropdown\n```\nSECRET explanation"),
        _md("SECRET markdown inside the solution"),
        _code("answer = 'SECRET code'", outputs=["SECRET output"]),
        _md("```{solution-end}\n```\nText after the solution."),
        _md("```{exercise}\n:label: ch03-denominators\nList them.\n```"),
        _md("````{solution} ch03-denominators\n```python\nSECRET in a plain solution\n```\n````"),
        _md("```{exercise}\n:label: ch03-t2t-base\nNo solution yet.\n```"),
    ])
    out = student.strip_notebook(nb)
    text = json.dumps(out)
    assert "SECRET" not in text and "solution-start" not in text and "solution-end" not in text
    assert "{solution}" not in text
    sources = [c.source for c in out.cells]
    assert sources[0] == "x = 1" and "Text after the solution." in sources
    assert "Compute it. Store it in `answer`.\n```" in sources[1] and "dropdown" not in sources[1]
    for label in ("ch03-pe-row", "ch03-denominators", "ch03-t2t-base"):
        at = next(i for i, c in enumerate(out.cells) if c.metadata.get("exercise") == label)
        ex = EXERCISES[label]
        assert out.cells[at].source == ex.stub() and out.cells[at].outputs == []
        assert out.cells[at + 1].source == f"from companion.exercises import {ex.checker_name}\n\n{ex.checker_name}(answer)"
        assert "answer = ...  # your code" in ex.stub()
    nbformat.validate(out)


def test_function_stubs_name_the_signature():
    assert "def permuted_weights(weights, perm): ...  # your code" in EXERCISES["ch01-permuted-weights"].stub()
    assert "from companion.exercises import rotation_mystery_tables" in EXERCISES["ch05-which-shift"].stub()


@pytest.mark.parametrize("cells, message", [
    ([_md("```{exercise}\n:label: ch99-unknown\nx\n```")], "ch99-unknown"),
    ([_md("```{exercise}\n:label: ch03-pe-row\nx\n```\n```{solution-start} ch03-pe-row\n```"), _code("1")], "no {solution-end}"),
])
def test_stripper_refuses_what_it_cannot_strip_safely(cells, message):
    with pytest.raises(student.StripError, match=re.escape(message)):
        student.strip_notebook(nbformat.v4.new_notebook(cells=cells))


def test_student_toc_keeps_the_books_numbering_and_drops_the_guide():
    toc = {"root": "book/index", "parts": [
        {"caption": "A", "numbered": True,
         "chapters": [{"file": "book/01_why_order"}, {"file": "book/instructors"}]},
        {"caption": "Back",
         "chapters": [{"file": "book/references"}, {"file": "book/instructors"}]}]}
    out = student.student_toc(toc)
    first = {"caption": "A", "numbered": True,
             "chapters": [{"file": "book/01_why_order"}]}
    assert out["parts"][0] == first, "the chapters keep their numbering, less the guide"
    back = {"caption": "Back", "chapters": [{"file": "book/references"}]}
    assert out["parts"][1] == back, "the back matter stays unnumbered, less the guide"


# ---- the leak check --------------------------------------------------------------------------------

def norm(line: str) -> str:
    """A line as a page shows it: no indentation, no Markdown code backticks."""
    return line.strip().strip("`").strip()


FENCE = re.compile(r"^(`{3,}|:{3,})\{solution-(start|end)\}")


def solution_and_public_lines() -> tuple[set[str], set[str]]:
    """Lines of the book's solutions (code, text and outputs), and every other line of the book.

    Written apart from the stripper, so that the check does not share its mistakes."""
    secret, public = set(), set()
    for path in NOTEBOOKS:
        inside = False
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            texts = ["".join(cell["source"])]
            for out in cell.get("outputs", []):
                texts.append("".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", "")))
            for text in texts:
                fence = None
                for line in text.splitlines():
                    match = FENCE.match(line.strip())
                    if match:
                        inside, fence = match.group(2) == "start", match.group(1)
                        continue
                    if fence and line.strip() == fence:  # the fence's closing line
                        fence = None
                        continue
                    if fence and line.strip().startswith(":"):  # the fence's options
                        continue
                    (secret if inside else public).add(norm(line))
    return secret, public


def generated_lines() -> set[str]:
    lines = set()
    for ex in EXERCISES.values():
        lines |= {norm(line) for line in (ex.stub() + "\n" + ex.check_call()).splitlines()}
    return lines


def text_lines(path: Path) -> set[str]:
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        nb = json.loads(raw)
        parts = []
        for cell in nb["cells"]:
            parts.append("".join(cell["source"]))
            for out in cell.get("outputs", []):
                parts.append(json.dumps(out))
                parts.append("".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", "")))
        raw = "\n".join(parts)
    elif path.suffix in (".html", ".htm", ".xml"):
        raw = html.unescape(re.sub(r"<[^>]+>", "", raw))
    return {norm(line) for line in raw.splitlines()}


def identifiers(lines: set[str]) -> set[str]:
    return {tok for line in lines for tok in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", line)}


@pytest.fixture(scope="module")
def student_edition():
    if os.environ.get("STUDENT_HTML"):
        student.build_site_from_book(STUDENT)
    student.build_notebooks(NOTEBOOKS, STUDENT / "notebooks")
    return STUDENT


def test_student_notebooks_one_per_chapter(student_edition):
    names = sorted(p.name for p in (student_edition / "notebooks").glob("*.ipynb"))
    assert names == [p.name for p in NOTEBOOKS]
    for path in (student_edition / "notebooks").glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        stubs = [c.metadata["exercise"] for c in nb.cells if "exercise" in c.metadata]
        assert sorted(stubs) == sorted(label for label, ex in EXERCISES.items() if ex.chapter == path.stem)


def test_no_line_of_any_solution_reaches_the_student_edition(student_edition):
    secret, public = solution_and_public_lines()
    allowed = public | generated_lines()
    # A solution line counts if it says something: not a bracket, not a blank or a bare "else:".
    leaks = {line for line in secret - allowed if len(line) >= 8 and re.search(r"[A-Za-z0-9]{2}", line)}
    assert len(leaks) > 200, "the solutions were not found: the check would prove nothing"
    words = {tok for tok in identifiers(leaks) - identifiers(allowed) if len(tok) >= 6 and ("_" in tok or any(c.isdigit() for c in tok))}
    files = [p for p in student_edition.rglob("*") if p.is_file() and p.suffix in (
        ".ipynb", ".html", ".js", ".txt", ".json", ".md", ".py", ".xml", ".yml")]
    assert files, "nothing to check: run make student"
    word = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, sorted(words))) + r")(?![A-Za-z0-9_])")
    for path in files:
        found = leaks & text_lines(path)
        assert not found, f"{path.relative_to(ROOT)} holds solution lines: {sorted(found)[:3]}"
        seen = set(word.findall(path.read_text(encoding="utf-8", errors="replace")))
        assert not seen, f"{path.relative_to(ROOT)} holds names only solutions use: {sorted(seen)[:5]}"


def test_student_notebooks_do_not_promise_folded_solutions():
    """The book's note says solutions follow each exercise, folded; the student edition
    has none, so its note says what stands there instead."""
    from fold_solutions import NOTE as folded
    for path in NOTEBOOKS:
        nb = student.strip_notebook(nbformat.read(path, as_version=4))
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert folded not in text, f"{path.name}: the student edition promises solutions"
        if "## Exercises" in text:
            assert student.STUDENT_NOTE in text, f"{path.name}: no note under Exercises"


def test_the_student_kit_holds_the_student_notebooks_and_no_solution(tmp_path):
    import zipfile

    notebooks = tmp_path / "notebooks"
    student.build_notebooks(NOTEBOOKS, notebooks)
    kit = student.build_kit(notebooks, tmp_path / "kit.zip")
    with zipfile.ZipFile(kit) as zf:
        names = zf.namelist()
        chapters = sorted(n for n in names if n.endswith(".ipynb"))
        texts = [zf.read(n).decode() for n in chapters]
    top = "positional-encoding-student/"
    assert chapters == [f"{top}book/{p.name}" for p in NOTEBOOKS], "every chapter, in book/"
    assert not [n for n, t in zip(chapters, texts) if "solution-start" in t], (
        "no notebook in the kit has a solution")
    for needed in ("Makefile", "README.md", "requirements.txt", "companion/__init__.py",
                   "book/data/lab_results.json"):
        assert top + needed in names, f"the kit has {needed}"
    assert not [n for n in names if n.startswith(top + "tools/")], "no grader, no tools"


def test_exercises_with_an_open_question_get_an_answer_cell_the_grader_collects(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    import assignment

    from companion.exercises.registry import WRITTEN

    out = tmp_path / "notebooks"
    student.build_notebooks(NOTEBOOKS, out)
    found = assignment.written_answers(sorted(out.glob("*.ipynb")))
    assert sorted(found) == sorted(WRITTEN), "one answer cell per open question"
    assert all("Write your answer here" in text for text in found.values()), (
        "each cell says what to do")
