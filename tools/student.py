"""Build the student edition: the chapters without their solutions, and a website from
them.

    python tools/student.py                   # notebooks and website into
    _build/student/ python tools/student.py --notebooks-only  # only
    _build/student/notebooks/

For every ``{exercise}`` the student notebook keeps the statement. Everything between
its ``{solution-start}`` and ``{solution-end}`` fences (the fences, explanations,
solution code and its outputs) is replaced by two cells: a stub naming what to write
(cell metadata ``{"exercise": label}``, which the grader uses) and a cell that calls the
checker. A plain ``{solution}`` block is removed the same way. The registry
(:mod:`companion.exercises.registry`) gives the name and the checker of each exercise.

The website is built by Jupyter Book from a staging copy of the sources in
``_build/.student-build/`` (the student notebooks, the other pages of ``book/`` except
the instructor's page, ``INSTRUCTORS.md``, from which the landing page quotes the
prerequisites and the chapters' objectives, and ``_config.yml`` and ``_toc.yml`` with
the student overlay: ``book_edition: student``, no links to the repository's sources),
then copied to
``_build/student/html``. Pages, downloadable sources and the search index all come from
the student notebooks, so no solution reaches them.
"""

from __future__ import annotations

import argparse
import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from companion.exercises.registry import EXERCISES, WRITTEN  # noqa: E402
sys.path.insert(0, str(ROOT / "tools"))
from fold_solutions import NOTE as FOLDED_NOTE  # noqa: E402
from pdf import merge  # noqa: E402  (the same overlay merge as the PDF's)

# What stands under each "## Exercises" heading in place of FOLDED_NOTE, which says the
# solutions follow the exercises, folded: in this edition they do not.
STUDENT_NOTE = (
    "Under each exercise is a cell to fill in (it names what to write) and a cell that "
    "runs its checker; the checker says whether your answer is right and, if not, "
    "what is off."
)

# Pages of book/ that the student edition leaves out.
INSTRUCTOR_ONLY = {"instructors.md"}
# Files outside book/ that its pages include (the landing page quotes INSTRUCTORS.md).
QUOTED = ("INSTRUCTORS.md",)
OVERLAY = ROOT / "tools" / "student_config.yml"

FENCE_OPEN = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\s*\{(?P<name>[a-z-]+)\}\s*(?P<arg>\S*)"
)
EXERCISE_LABEL = re.compile(
    r"^(`{3,}|:{3,})\s*\{exercise\}[^\n]*\n(?::[^\n]*\n)*?:label:\s*(\S+)", re.M
)


class StripError(ValueError):
    pass


def exercise_labels(nb) -> list[str]:
    """Labels of the ``{exercise}`` blocks of a notebook, in order."""
    return [m.group(2) for c in nb.cells if c.cell_type == "markdown"
            for m in EXERCISE_LABEL.finditer(c.source)]


def _directive_end(lines: list[str], start: int, fence: str) -> int:
    """Index of the line closing the directive opened at ``lines[start]`` (nested fences
    allowed)."""
    depth = 0
    for i in range(start + 1, len(lines)):
        stripped = lines[i].strip()
        match = FENCE_OPEN.match(stripped)
        if match and match.group("fence")[0] == fence[0]:
            depth += 1
        elif stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            if depth == 0:
                return i
            depth -= 1
    raise StripError(f"unclosed {fence} directive: {lines[start].strip()}")


def _new_cell(kind: str, source: str, cell_id: str, metadata: dict):
    cell = (
        nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    )(source)
    cell.id = cell_id
    cell.metadata = metadata
    return cell


def stub_cells(label: str) -> list:
    """The cells that stand where the solution of ``label`` was: the stub, the
    checker's call, and for an exercise with an open question an answer cell."""
    ex = EXERCISES[label]
    cells = [
        _new_cell("code", ex.stub(), f"{label}-stub", {"exercise": label}),
        _new_cell("code", ex.check_call(), f"{label}-check", {"exercise-check": label}),
    ]
    if label in WRITTEN:
        text = (f"**Answer {label}**\n\n*{WRITTEN[label]}* Write your answer here, in "
                "place of this sentence; your instructor marks it by hand.")
        written = _new_cell("markdown", text, f"{label}-written", {"written": label})
        cells.append(written)
    return cells


def strip_notebook(nb):
    """A copy of ``nb`` without solutions, with a stub and a checker call per
    exercise."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and FOLDED_NOTE in cell.source:
            cell.source = cell.source.replace(FOLDED_NOTE, STUDENT_NOTE)
    labels = exercise_labels(nb)
    unknown = [label for label in labels if label not in EXERCISES]
    if unknown:
        raise StripError(
            f"exercises {unknown} are not in companion/exercises/registry.py: add one "
            "line per exercise there (its docstring says how)"
        )
    out, solving, placed = [], None, set()

    def close(label):
        out.extend(stub_cells(label))
        placed.add(label)

    for cell in nb.cells:
        if solving is not None and cell.cell_type != "markdown":
            continue  # solution code, with its outputs
        if cell.cell_type != "markdown":
            out.append(cell)
            continue
        lines, kept, i = cell.source.split("\n"), [], 0
        while i < len(lines):
            match = FENCE_OPEN.match(lines[i].strip())
            name = match.group("name") if match else None
            if solving is not None:
                if name == "solution-end":
                    i = _directive_end(lines, i, match.group("fence")) + 1
                    _flush(out, cell, kept)
                    kept = []
                    close(solving)
                    solving = None
                    continue
                i += 1
                continue
            if name == "solution-start":
                end = _directive_end(lines, i, match.group("fence"))
                _flush(out, cell, kept)
                kept = []
                solving = match.group("arg")
                if solving not in labels:
                    raise StripError(
                        f"solution for {solving!r}, which has no exercise here"
                    )
                i = end + 1
                continue
            if name == "solution":
                end = _directive_end(lines, i, match.group("fence"))
                label = match.group("arg")
                if label not in labels:
                    raise StripError(
                        f"solution for {label!r}, which has no exercise here"
                    )
                _flush(out, cell, kept)
                kept = []
                close(label)
                i = end + 1
                continue
            kept.append(lines[i])
            i += 1
        _flush(out, cell, kept)
    if solving is not None:
        raise StripError(f"{{solution-start}} {solving} has no {{solution-end}}")
    for label in labels:  # an exercise without a solution still gets its stub
        if label not in placed:
            at = next(
                i
                for i, c in enumerate(out)
                if c.cell_type == "markdown" and label in exercise_labels_of(c)
            )
            out[at + 1:at + 1] = stub_cells(label)
    nb.cells = out
    return nb


def exercise_labels_of(cell) -> list[str]:
    return [m.group(2) for m in EXERCISE_LABEL.finditer(cell.source)]


def _flush(out: list, cell, kept: list[str]) -> None:
    """Append what is left of a markdown cell, if anything; a cell split by a solution
    gets a fresh id for its second part."""
    text = "\n".join(kept).strip("\n")
    if not text.strip():
        return
    part = copy.deepcopy(cell)
    part.source = text
    if any(c.get("id") == part.get("id") for c in out):
        part.id = (str(part.id) + "-after")[-64:]
    out.append(part)


def build_notebooks(notebooks: list[Path], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    # A chapter notebook left from an earlier build (chapters renumbered or renamed)
    # would reach the class as a stale copy: remove those, and nothing else.
    names = {path.name for path in notebooks}
    for stale in out_dir.glob("[0-9][0-9]_*.ipynb"):
        if stale.name not in names:
            stale.unlink()
    written = []
    for path in notebooks:
        try:
            student = strip_notebook(nbformat.read(path, as_version=4))
        except StripError as err:
            raise StripError(f"{path.name}: {err}") from None
        nbformat.validate(student)
        target = out_dir / path.name
        nbformat.write(student, target)
        written.append(target)
    return written


# ---- the website ---------------------------------------------------------------------

def student_config(config: dict) -> dict:
    overlay = yaml.safe_load(OVERLAY.read_text(encoding="utf-8")) or {}
    merged = merge(config, overlay)
    merged["title"] = f"{config.get('title', 'Book')} (student edition)"
    return merged


def student_toc(toc: dict) -> dict:
    """The toc without instructor-only pages. Its numbering is the book's (``_toc.yml``
    numbers the chapters' parts), so that "Exercise 3.2" is the same exercise in both
    editions."""
    toc = copy.deepcopy(toc)

    def keep(entry):
        return Path(str(entry.get("file", ""))).name + ".md" not in INSTRUCTOR_ONLY

    for part in toc.get("parts", []):
        part["chapters"] = [c for c in part.get("chapters", []) if keep(c)]
    toc["parts"] = [p for p in toc.get("parts", []) if p["chapters"]]
    if "chapters" in toc:
        toc["chapters"] = [c for c in toc["chapters"] if keep(c)]
    return toc


def stage(student_notebooks: Path, staging: Path) -> None:
    if staging.exists():
        shutil.rmtree(staging)
    ignore = shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", *INSTRUCTOR_ONLY)
    shutil.copytree(ROOT / "book", staging / "book", ignore=ignore)
    for nb in student_notebooks.glob("*.ipynb"):
        shutil.copy2(nb, staging / "book" / nb.name)
    for name in QUOTED:
        shutil.copy2(ROOT / name, staging / name)
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    extension_dirs = set(
        (config.get("sphinx") or {}).get("local_extensions", {}).values()
    )
    for folder in extension_dirs:
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, staging / folder, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
    (staging / "_config.yml").write_text(
        yaml.safe_dump(student_config(config), sort_keys=False), encoding="utf-8"
    )
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    (staging / "_toc.yml").write_text(
        yaml.safe_dump(student_toc(toc), sort_keys=False), encoding="utf-8"
    )


def build_site(
    student_notebooks: Path, html_out: Path, work: Path, strict: bool
) -> None:
    staging = work / "src"
    stage(student_notebooks, staging)
    command = [
        str(Path(sys.executable).with_name("jupyter-book")),
        "build",
        str(staging),
        "--path-output",
        str(work / "out"),
        "--keep-going",
    ]
    if strict:
        command += ["--warningiserror", "--nitpick"]
    subprocess.run(command, check=True)
    if html_out.exists():
        shutil.rmtree(html_out)
    shutil.copytree(work / "out" / "_build" / "html", html_out)


# ---- the student kit ---------------------------------------------------------------

KIT_NAME = "student-kit.zip"
KIT_FILES = ("pyproject.toml", "requirements.txt", "constraints.txt", "LICENSE")
KIT_README = """# Positional Encoding, Executed: the student kit

The book's chapters as notebooks without their solutions (in `book/`), the `companion`
package they import, with the exercises' checkers, and the lab's recorded runs
(`book/data/`). You need Python 3.11 (3.11.5 or newer), 3.12 or 3.13, and `make`.

    make lab   # creates .venv (1.8 GB with PyTorch's CPU build), opens JupyterLab

Start with chapter 1. Under each exercise, write your answer in the cell that names it,
then run the cell below it: the checker says whether your answer is right and, if not,
what is off. Hand in the chapter notebooks under their file names
(`03_formula.ipynb`). Without make (Windows PowerShell):

    py -3.12 -m venv .venv
    .venv\\Scripts\\python -m pip install -r requirements.txt -c constraints.txt
    .venv\\Scripts\\python -m pip install --no-deps -e .
    .venv\\Scripts\\jupyter lab book

On Linux the default PyTorch wheel bundles CUDA (several GB); nothing here needs a GPU,
so install the CPU build of torch 2.13.0 into .venv first for a smaller download.
"""
KIT_MAKEFILE = """# make lab: create .venv from the pins, then open JupyterLab.
PYTHON ?= python3
lab: .venv/.installed
\t.venv/bin/jupyter lab book $(if $(PORT),--port=$(PORT)) \\
\t\t$(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root) $(LAB_ARGS)
.venv/.installed: requirements.txt constraints.txt pyproject.toml
\ttest -d .venv || $(PYTHON) -m venv .venv
\t.venv/bin/python -m pip install --quiet -r requirements.txt -c constraints.txt
\t.venv/bin/python -m pip install --quiet --no-deps -e .
\ttouch .venv/.installed
.PHONY: lab
"""


def build_kit(student_notebooks: Path, out: Path) -> Path:
    """A zip a student can start from: the student notebooks in ``book/``, the
    companion package, the lab's record and the pinned requirements; no solution."""
    import zipfile

    out.parent.mkdir(parents=True, exist_ok=True)
    top = "positional-encoding-student"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as kit:
        for name in KIT_FILES:
            kit.write(ROOT / name, f"{top}/{name}")
        kit.writestr(f"{top}/README.md", KIT_README)
        kit.writestr(f"{top}/Makefile", KIT_MAKEFILE)
        for folder in ("companion", "book/data"):
            for path in sorted((ROOT / folder).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    kit.write(path, f"{top}/{path.relative_to(ROOT).as_posix()}")
        for path in sorted(student_notebooks.glob("[0-9][0-9]_*.ipynb")):
            kit.write(path, f"{top}/book/{path.name}")
    return out


def build_site_from_book(out: Path, strict: bool = False) -> None:
    """Student notebooks from book/ into ``out/notebooks``, and the website into
    ``out/html``."""
    build_notebooks(
        sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")), out / "notebooks"
    )
    build_site(out / "notebooks", out / "html", out.parent / ".student-build", strict)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "student")
    parser.add_argument("--notebooks-only", action="store_true")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail on Sphinx warnings, as `make book` does",
    )
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    notebooks = args.notebooks or sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    written = build_notebooks(notebooks, args.out / "notebooks")
    print(f"{len(written)} student notebooks in {args.out / 'notebooks'}")
    kit = build_kit(args.out / "notebooks", args.out / KIT_NAME)
    print(f"The student kit (notebooks, companion, lab record) is {kit}")
    if not args.notebooks_only:
        build_site(
            args.out / "notebooks",
            args.out / "html",
            args.out.parent / ".student-build",
            args.strict,
        )
        shutil.copy(kit, args.out / "html" / KIT_NAME)  # the landing page links it
        print(f"The student edition is at {args.out / 'html' / 'index.html'}")


if __name__ == "__main__":
    main()
