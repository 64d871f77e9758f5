"""Fold every solution in JupyterLab, as the website folds it in a dropdown.

JupyterLab does not fold ``{solution-start}`` ... ``{solution-end}`` dropdowns: the
solution's cells would sit in plain view under each exercise. This marks each cell
between the two fences collapsed (JupyterLab's ``jupyter.source_hidden`` and, for code,
``outputs_hidden`` metadata; a folded cell shows as a bar with three dots, a click
unfolds it) and puts :data:`NOTE` under each chapter's "## Exercises" heading, so a
learner knows what the dots are. The website ignores both (its dropdowns fold the same
cells); the student edition has no solutions and replaces the note (tools/student.py).

    python tools/fold_solutions.py book/*.ipynb          # fold, in place
    python tools/fold_solutions.py --check book/*.ipynb  # exit 1, naming what is not

tests/test_book.py runs the check on every chapter.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HEADING = "## Exercises"
NOTE = (
    "Each exercise is followed by its solution, folded. On the website, open "
    '"Solution to\nExercise"; in JupyterLab, the solution\'s cells are collapsed '
    "to a bar with three dots: try\nthe exercise first, then click the dots to unfold "
    "them."
)
START = re.compile(r"^\s*(`{3,}|:{3,})\{solution-start\}", re.M)
END = re.compile(r"^\s*(`{3,}|:{3,})\{solution-end\}", re.M)
HEADING_LINE = re.compile(r"^## Exercises[ \t]*$", re.M)


def _text(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def solution_cells(nb: dict) -> list[int]:
    """Indices of the cells strictly between a solution's start and end fences."""
    inside, found = False, []
    for i, cell in enumerate(nb["cells"]):
        text = _text(cell) if cell["cell_type"] == "markdown" else ""
        if inside and END.search(text):
            inside = False
            continue
        if inside:
            found.append(i)
        if START.search(text) and not END.search(text.split("{solution-start}")[-1]):
            inside = True
    return found


def _wanted(cell: dict) -> dict:
    if cell["cell_type"] == "code":
        return {"source_hidden": True, "outputs_hidden": True}
    return {"source_hidden": True}


def problems(nb: dict) -> list[str]:
    """What is not folded: cells of a solution shown, or the note missing."""
    found = []
    for i in solution_cells(nb):
        jupyter = nb["cells"][i].get("metadata", {}).get("jupyter", {})
        if any(jupyter.get(k) is not True for k in _wanted(nb["cells"][i])):
            found.append(f"cell {i} is part of a solution but not folded in JupyterLab")
    headed = [
        c
        for c in nb["cells"]
        if c["cell_type"] == "markdown" and HEADING_LINE.search(_text(c))
    ]
    if headed and NOTE not in _text(headed[0]):
        found.append(
            f"the text under {HEADING!r} does not say how solutions are folded"
        )
    return found


def fold(nb: dict) -> dict:
    for i in solution_cells(nb):
        cell = nb["cells"][i]
        cell.setdefault("metadata", {}).setdefault("jupyter", {}).update(_wanted(cell))
    for cell in nb["cells"]:
        text = _text(cell)
        heading = HEADING_LINE.search(text) if cell["cell_type"] == "markdown" else None
        if heading:
            if NOTE not in text:
                at = heading.end()
                text = f"{text[:at]}\n\n{NOTE}" + (
                    "\n" + text[at:] if text[at:] else ""
                )
                cell["source"] = text.splitlines(keepends=True)
            break
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument(
        "--check", action="store_true", help="only report, exit 1 if any"
    )
    args = parser.parse_args(argv)
    bad = 0
    for path in args.notebooks:
        nb = json.loads(path.read_text(encoding="utf-8"))
        if args.check:
            for problem in problems(nb):
                print(f"{path}: {problem} (run: python tools/fold_solutions.py {path})")
                bad += 1
            continue
        text = json.dumps(fold(nb), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        path.write_text(text, encoding="utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
