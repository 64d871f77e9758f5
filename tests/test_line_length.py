"""Every line of the companion package, of tools/*.py and of the chapters' code cells is
at most 88 characters."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINE = 88  # as [tool.ruff] line-length in pyproject.toml


def _files() -> list[Path]:
    return sorted(ROOT.glob("companion/**/*.py")) + sorted(ROOT.glob("tools/*.py"))


def test_files_are_found():
    names = {path.relative_to(ROOT).as_posix() for path in _files()}
    assert "companion/__init__.py" in names
    assert "companion/exercises/__init__.py" in names
    assert "tools/grade.py" in names


def test_no_line_is_longer_than_88_characters():
    too_long = []
    for path in _files():
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            if len(line) > MAX_LINE:
                name = path.relative_to(ROOT).as_posix()
                too_long.append(f"{name}:{number}: {len(line)} characters")
    assert not too_long, f"lines over {MAX_LINE} characters:\n" + "\n".join(too_long)


def test_no_notebook_code_line_is_longer_than_88_characters():
    import json

    too_long = []
    for path in sorted(ROOT.glob("book/*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for index, cell in enumerate(cells):
            if cell["cell_type"] != "code":
                continue
            for number, line in enumerate("".join(cell["source"]).splitlines(), 1):
                if len(line) > MAX_LINE:
                    too_long.append(f"{path.name} cell {index} line {number}: {len(line)}")
    assert not too_long, f"code lines over {MAX_LINE} characters:\n" + "\n".join(too_long)
