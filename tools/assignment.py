"""An assignment file: which exercises count, their points, the due date and the late
rule; and what ``make grade ASSIGNMENT=...`` writes from the grades.

    # tools/assignments/assignment1.yml
    name: Assignment 1                 # the column name in the LMS's grade CSV
    due: 2027-02-05T23:59:00+01:00     # ISO 8601, with its time zone
    late:
      per_day: 0.1                     # share of the points lost per started day late
      max_days: 3                      # later than this scores 0
    exercises:                         # label: points (a chapter name: each of its)
      ch01-permuted-weights: 5
      03_formula: 5
    written:                           # graded by hand: name: points
      ch01-equivariance-probe: 10   # an exercise's open question (registry.WRITTEN)

From the per-exercise rows of the grader (``tools/grade.py``) it writes, in ``_build/``:

* ``totals.csv``: one row per student: points of each part, the days late, the late
  factor and the score. With ``--roster`` (the grade book exported from Canvas, or any
  CSV with a ``Student`` or ``SIS Login ID`` column that names the students' folders),
  also ``lms.csv``: the roster's identity columns and one column, the assignment's name,
  which Canvas's and Gradescope's grade-book imports read.
* ``feedback/<student>.md``: each exercise, passed or not, its points and the checker's
  feedback; the written marks and comments; the late rule applied.
* ``written.csv``, the sheet to mark by hand: student, question, max_points, points,
  comment, and the student's answer: the text of the markdown cell whose first line
  names the question ("**Answer ch01-equivariance-probe**", as the student edition
  writes it, or a heading "Answer ch01-equivariance-probe").
  Fill in points and comments, then run the grader again with ``--marks
  _build/written.csv``: the marks are merged into the totals and the feedback, and kept
  in the new sheet.

Submission times come from ``--submitted FILE`` (``student,submitted_at`` in ISO 8601,
as an LMS exports them). Without them no late rule is applied, and the totals say so.
Everything here is a pure function of its inputs, so regrading the same submissions
with the same files writes the same totals.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from companion.exercises.registry import CHAPTERS, EXERCISES  # noqa: E402


class AssignmentError(ValueError):
    pass


@dataclass(frozen=True)
class Assignment:
    name: str
    points: dict[str, float]              # exercise label -> points
    written: dict[str, float] = field(default_factory=dict)  # question -> points
    due: dt.datetime | None = None
    late_per_day: float = 0.0
    late_max_days: int | None = None

    @property
    def max_points(self) -> float:
        return sum(self.points.values()) + sum(self.written.values())


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise AssignmentError(f"{what} must be a number 0 or more, got {value!r}")
    return float(value)


def parse(data: dict, source: str = "the assignment") -> Assignment:
    """An :class:`Assignment` from the file's data, with each error naming its key."""
    if not isinstance(data, dict):
        raise AssignmentError(
            f"{source}: expected keys name, exercises, ...; got {data!r}")
    unknown = set(data) - {"name", "due", "late", "exercises", "written"}
    if unknown:
        raise AssignmentError(f"{source}: unknown keys {sorted(unknown)}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise AssignmentError(f"{source}: `name:` is missing (the LMS column's name)")
    exercises = data.get("exercises")
    if not isinstance(exercises, dict) or not exercises:
        raise AssignmentError(f"{source}: `exercises:` must map labels to points")
    points: dict[str, float] = {}
    for key, value in exercises.items():
        worth = _number(value, f"{source}: the points of {key!r}")
        if key in EXERCISES:
            points[key] = worth
        elif key in CHAPTERS.values():
            for label, ex in EXERCISES.items():
                if ex.chapter == key:
                    points[label] = worth
        else:
            raise AssignmentError(
                f"{source}: {key!r} is neither an exercise label nor a chapter "
                "(see companion/exercises/registry.py, or INSTRUCTORS.md)"
            )
    written = {
        str(key): _number(value, f"{source}: the points of written {key!r}")
        for key, value in (data.get("written") or {}).items()
    }
    due = data.get("due")
    if due is not None:
        due = due if isinstance(due, dt.datetime) else _time(str(due), f"{source}: due")
        if due.tzinfo is None:
            raise AssignmentError(
                f"{source}: `due:` needs its time zone, e.g. 2027-02-05T23:59:00+01:00"
            )
    late = data.get("late") or {}
    per_day = _number(late.get("per_day", 0), f"{source}: late.per_day")
    if per_day > 1:
        raise AssignmentError(f"{source}: late.per_day is a share of the points, <= 1")
    max_days = late.get("max_days")
    if max_days is not None and (isinstance(max_days, bool) or not isinstance(
            max_days, int) or max_days < 0):
        raise AssignmentError(f"{source}: late.max_days must be a whole number of days")
    return Assignment(name.strip(), points, written, due, per_day, max_days)


def load(path: Path) -> Assignment:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise AssignmentError(f"{path}: cannot read it ({err})") from None
    return parse(data, str(path))


def _time(text: str, what: str) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise AssignmentError(
            f"{what}: {text!r} is not an ISO 8601 time (2027-02-05T23:59:00+01:00)"
        ) from None


def read_submitted(path: Path) -> dict[str, dt.datetime]:
    """``student,submitted_at`` rows: each student's submission time."""
    times = {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if "student" not in row or "submitted_at" not in row:
                raise AssignmentError(f"{path}: needs the columns student,submitted_at")
            when = _time(row["submitted_at"], f"{path}: {row['student']}")
            if when.tzinfo is None:
                raise AssignmentError(f"{path}: {row['student']}: give the time zone")
            times[row["student"].strip()] = when
    return times


def late_factor(
    assignment: Assignment, submitted: dt.datetime | None
) -> tuple[int, float]:
    """(days late, counting each started day, and the factor on the points)."""
    if assignment.due is None or submitted is None or submitted <= assignment.due:
        return 0, 1.0
    days = math.ceil((submitted - assignment.due) / dt.timedelta(days=1))
    if assignment.late_max_days is not None and days > assignment.late_max_days:
        return days, 0.0
    return days, max(0.0, 1.0 - assignment.late_per_day * days)


def read_marks(path: Path) -> dict[tuple[str, str], tuple[float | None, str]]:
    """``student,question,points,comment`` rows filled in by hand."""
    marks = {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            text = (row.get("points") or "").strip()
            try:
                points = float(text) if text else None
            except ValueError:
                raise AssignmentError(
                    f"{path}: {row.get('student')}, {row.get('question')}: points "
                    f"{text!r} is not a number"
                ) from None
            marks[row["student"], row["question"]] = (points, row.get("comment") or "")
    return marks


def totals(rows, assignment: Assignment, students: list[str],
           submitted: dict[str, dt.datetime] | None = None,
           marks: dict | None = None) -> list[dict]:
    """One dict per student: points auto and written, late days and factor, score."""
    passed = {(r.student, r.exercise): r.passed for r in rows}
    out = []
    for student in students:
        auto = sum(p for label, p in assignment.points.items()
                   if passed.get((student, label)))
        written = 0.0
        for question, worth in assignment.written.items():
            points, _ = (marks or {}).get((student, question), (None, ""))
            if points is not None and not 0 <= points <= worth:
                raise AssignmentError(
                    f"{student}, {question}: {points:g} points, outside 0 to {worth:g}"
                )
            written += points or 0.0
        days, factor = late_factor(assignment, (submitted or {}).get(student))
        out.append({
            "student": student, "auto_points": round(auto, 2),
            "written_points": round(written, 2), "max_points": assignment.max_points,
            "days_late": days, "late_factor": round(factor, 4),
            "score": round((auto + written) * factor, 2),
        })
    return out


TOTAL_FIELDS = ["student", "auto_points", "written_points", "max_points", "days_late",
                "late_factor", "score"]
ROSTER_ID = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def write_totals(table: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, TOTAL_FIELDS)
        writer.writeheader()
        writer.writerows(table)


def write_lms(table: list[dict], assignment: Assignment, roster: Path, path: Path
              ) -> list[str]:
    """The grade book's identity columns and the assignment's score; returns the
    students graded but not on the roster."""
    with open(roster, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        people = [row for row in reader if (row.get("Student") or "").strip()
                  and "Points Possible" not in row.get("Student", "")]
        keys = [k for k in ROSTER_ID if k in (reader.fieldnames or [])]
        # Canvas names an existing assignment's column "Assignment 1 (123)": write to it
        column = next((c for c in reader.fieldnames or []
                       if c == assignment.name or c.startswith(f"{assignment.name} (")),
                      assignment.name)
    if "Student" not in keys and "SIS Login ID" not in keys:
        raise AssignmentError(f"{roster}: needs a Student or SIS Login ID column")
    score = {row["student"]: row["score"] for row in table}
    found = set()
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(keys + [column])
        for person in people:
            names = {(person.get(k) or "").strip() for k in ("SIS Login ID", "Student")}
            match = next((n for n in names if n in score), None)
            found.add(match)
            writer.writerow([person.get(k, "") for k in keys]
                            + [score[match] if match else ""])
    return sorted(set(score) - found)


def write_feedback(rows, assignment: Assignment, table: list[dict], folder: Path,
                   marks: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    mine = {}
    for row in rows:
        mine.setdefault(row.student, {})[row.exercise] = row
    for total in table:
        student = total["student"]
        lines = [f"# {assignment.name}: {student}", ""]
        for label, worth in assignment.points.items():
            row = mine.get(student, {}).get(label)
            got = worth if row is not None and row.passed else 0
            feedback = row.feedback if row is not None else "not submitted"
            lines.append(f"- `{label}`: {got:g} of {worth:g} points. {feedback}")
        for question, worth in assignment.written.items():
            points, comment = (marks or {}).get((student, question), (None, ""))
            got = ("not marked yet" if points is None
                   else f"{points:g} of {worth:g} points")
            lines.append(f"- written `{question}`: {got}. {comment}".rstrip())
        if total["days_late"]:
            lines.append(f"\nSubmitted {total['days_late']} day(s) late: points times "
                         f"{total['late_factor']:g}.")
        lines.append(f"\nScore: {total['score']:g} of {total['max_points']:g}.")
        (folder / f"{student}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


ANSWER = re.compile(r"^[#*\s]*answer\s+(\S+?)[*:\s]*$", re.IGNORECASE)
MAX_ANSWER = 20_000  # characters of one written answer


def written_answers(notebooks: list[Path]) -> dict[str, str]:
    """question -> the text of the markdown cells that answer it, read as JSON (no code
    runs); a notebook that does not parse gives none."""
    found: dict[str, str] = {}
    for path in notebooks:
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError, AttributeError):
            continue
        for cell in cells if isinstance(cells, list) else []:
            if not isinstance(cell, dict) or cell.get("cell_type") != "markdown":
                continue
            source = cell.get("source", "")
            text = "".join(source) if isinstance(source, list) else str(source)
            first, _, rest = text.strip().partition("\n")
            match = ANSWER.match(first)
            if match:
                found[match.group(1)] = rest.strip()[:MAX_ANSWER]
    return found


def write_written(assignment: Assignment, answers: dict[str, dict[str, str]],
                  path: Path, marks: dict | None = None) -> None:
    """The sheet of written answers to mark by hand, keeping marks already given;
    ``answers`` maps each student to their question -> text."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "question", "max_points", "points", "comment",
                         "answer"])
        for student in sorted(answers):
            for question, worth in assignment.written.items():
                points, comment = (marks or {}).get((student, question), (None, ""))
                text = answers[student].get(question, "(no answer found)")
                mark = "" if points is None else f"{points:g}"
                writer.writerow([student, question, f"{worth:g}", mark, comment, text])
