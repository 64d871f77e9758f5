"""Gradescope's results.json from the grader's grades.csv (one submission, one student).

    python tools/gradescope/results.py grades.csv results.json [--log grade.log] [--expect LABEL_OR_CHAPTER ...]

Each exercise becomes one Gradescope test worth 1 point, named "<chapter>: <label>", whose
output is the checker's feedback. ``--expect`` lists the exercises the assignment covers (a
label such as ``ch03-pe-row``, or a chapter such as ``03_formula`` for all of its exercises):
an expected exercise with no row, because its chapter was not uploaded, scores 0.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def expected_labels(items: list[str]) -> list[tuple[str, str]]:
    from companion.exercises.registry import EXERCISES  # noqa: PLC0415

    pairs = []
    for item in items:
        matches = [ex for ex in EXERCISES.values() if item in (ex.label, ex.chapter)]
        if not matches:
            raise SystemExit(f"--expect {item}: no such exercise label or chapter")
        pairs += [(ex.chapter, ex.label) for ex in matches]
    return list(dict.fromkeys(pairs))


def results_from_csv(path: Path, expect: list[str] | None = None, log: str = "") -> dict:
    rows = []
    if path.is_file():
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    tests, seen = [], set()
    for row in rows:
        seen.add((row["chapter"], row["exercise"]))
        passed = row["passed"] == "1"
        tests.append({"name": f"{row['chapter']}: {row['exercise']}", "score": int(passed), "max_score": 1,
                      "status": "passed" if passed else "failed", "output": row["feedback"]})
    for chapter, label in expected_labels(expect or []):
        if (chapter, label) not in seen:
            tests.append({"name": f"{chapter}: {label}", "score": 0, "max_score": 1, "status": "failed",
                          "output": f"not submitted: upload {chapter}.ipynb"})
    output = f"{sum(t['score'] for t in tests)} of {len(tests)} exercises passed."
    if not rows:
        output = "No chapter notebook was graded. Upload your notebooks under their chapter file names " \
                 "(for example 03_formula.ipynb).\n" + log[-2000:]
    return {"score": sum(t["score"] for t in tests), "output": output, "tests": tests,
            "visibility": "visible", "stdout_visibility": "hidden"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grades", type=Path)
    parser.add_argument("results", type=Path)
    parser.add_argument("--log", type=Path)
    parser.add_argument("--expect", nargs="*", default=[])
    args = parser.parse_args()
    log = args.log.read_text(errors="replace") if args.log and args.log.is_file() else ""
    data = results_from_csv(args.grades, args.expect, log)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(data, indent=2), encoding="utf-8")
    print(data["output"])


if __name__ == "__main__":
    main()
