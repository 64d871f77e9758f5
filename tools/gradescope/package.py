"""Write the Gradescope autograder zip: ``_build/gradescope/autograder.zip``.

    python tools/gradescope/package.py [--assignment ch03-pe-row 09_alibi ...]

The zip holds what the grader needs (the companion package, tools/, the pinned requirements)
and, at its root, Gradescope's ``setup.sh`` and ``run_autograder``. No notebook and no
solution goes in. ``--assignment`` writes ``assignment.txt``: the exercises (labels, or
chapters for all of theirs) the assignment covers, so a chapter not uploaded scores 0.
"""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = ["pyproject.toml", "README.md", "requirements.txt", "constraints.txt"]
FOLDERS = ["companion", "tools"]


def package(out: Path, assignment: list[str]) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in FILES:
            zf.write(ROOT / name, name)
        for folder in FOLDERS:
            for path in sorted((ROOT / folder).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    zf.write(path, path.relative_to(ROOT).as_posix())
        for name in ("setup.sh", "run_autograder"):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            zf.writestr(info, (ROOT / "tools" / "gradescope" / name).read_text())
        if assignment:
            zf.writestr("assignment.txt", " ".join(assignment) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", nargs="*", default=[])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "gradescope" / "autograder.zip")
    args = parser.parse_args()
    print(package(args.out, args.assignment))


if __name__ == "__main__":
    main()
