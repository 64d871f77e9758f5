"""Assignment files (tools/assignment.py): points, the late rule, the totals an LMS
imports, feedback per student and the sheet of written answers, and their merge."""

from __future__ import annotations

import csv
import datetime as dt
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import assignment as a  # noqa: E402
import grade  # noqa: E402

UTC = dt.timezone.utc
BASE = {"name": "A1", "due": "2027-02-05T23:59:00+00:00",
        "late": {"per_day": 0.1, "max_days": 3},
        "exercises": {"ch03-pe-row": 5, "09_alibi": 2}, "written": {"why": 10}}


def test_the_shipped_assignment_files_parse_and_add_up():
    one = a.load(ROOT / "tools" / "assignments" / "assignment1.yml")
    assert len(one.points) == 12, "Assignment 1 lists 12 exercises (INSTRUCTORS.md)"
    assert one.max_points == 100, "60 autograded, 30 written, 10 for a clean run"


def test_a_chapter_counts_each_of_its_exercises():
    plan = a.parse(BASE)
    alibi = [label for label in plan.points if label.startswith("ch09-")]
    assert len(alibi) == 3, "09_alibi stands for its three exercises"
    assert plan.max_points == 5 + 3 * 2 + 10, "points of each part added"


@pytest.mark.parametrize("change, words", [
    ({"name": ""}, "`name:` is missing"),
    ({"exercises": {"ch99-nothing": 1}}, "neither an exercise label nor a chapter"),
    ({"exercises": {"ch03-pe-row": -1}}, "0 or more"),
    ({"due": "2027-02-05T23:59:00"}, "time zone"),
    ({"due": "next friday"}, "not an ISO 8601 time"),
    ({"late": {"per_day": 2}}, "share of the points"),
    ({"surprise": 1}, "unknown keys"),
])
def test_a_bad_file_says_which_key_is_wrong(change, words):
    with pytest.raises(a.AssignmentError, match=words):
        a.parse({**BASE, **change})


@pytest.mark.parametrize("hours_late, days, factor", [
    (-1, 0, 1.0), (0, 0, 1.0), (1, 1, 0.9), (24, 1, 0.9), (25, 2, 0.8), (72, 3, 0.7),
    (73, 4, 0.0),
])
def test_each_started_day_late_costs_a_tenth_until_the_last_day(
        hours_late, days, factor):
    plan = a.parse(BASE)
    when = plan.due + dt.timedelta(hours=hours_late)
    got_days, got = a.late_factor(plan, when)
    assert got_days == days, f"{hours_late} h late: {days} started days"
    assert got == pytest.approx(factor), f"{hours_late} h late: points times {factor}"


def _dicts(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _lists(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def _rows():
    R = grade.Row
    return [R("ann", "03_formula", "ch03-pe-row", True, "Correct."),
            R("ann", "09_alibi", "ch09-slopes-12", True, "Correct."),
            R("ann", "09_alibi", "ch09-bias-entry", False, "Not yet."),
            R("ben", "03_formula", "ch03-pe-row", False, "Not yet.")]


def test_totals_add_points_and_hand_marks_then_apply_the_late_rule():
    plan = a.parse(BASE)
    submitted = {"ben": plan.due + dt.timedelta(hours=30)}
    marks = {("ann", "why"): (7.0, "good"), ("ben", "why"): (10.0, "")}
    ann, ben = a.totals(_rows(), plan, ["ann", "ben"], submitted, marks)
    assert ann["auto_points"] == 7, "5 + 2 points autograded"
    assert ann["written_points"] == 7, "and 7 by hand"
    assert ann["score"] == 14, "on time: the points as they are"
    assert ben["days_late"] == 2, "30 hours late: two started days"
    assert ben["score"] == 8, "10 points, two days late: 8"


def test_a_mark_above_the_question_points_is_refused():
    with pytest.raises(a.AssignmentError, match="outside 0 to 10"):
        a.totals(_rows(), a.parse(BASE), ["ann"], None, {("ann", "why"): (11.0, "")})


def test_the_report_files(tmp_path):
    plan = a.parse(BASE)
    subs = tmp_path / "subs"
    for student in ("ann", "ben"):
        (subs / student).mkdir(parents=True)
    cells = [{"cell_type": "markdown", "metadata": {},
              "source": ["## Answer why\n", "Because sines are bounded."]}]
    (subs / "ann" / "03_formula.ipynb").write_text(json.dumps({"cells": cells}))
    (subs / "ben" / "03_formula.ipynb").write_text("{ not json")
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,A1 (77)\n"
                      "    Points Possible,,,,,21\n"
                      "Ann A,1,s1,ann,S,\nCid C,3,s3,cid,S,\n")
    out = tmp_path / "out"
    grade.report_assignment(plan, _rows(), subs, out, None, None, roster)
    totals = _dicts(out / "totals.csv")
    assert [t["student"] for t in totals] == ["ann", "ben"], "one row per student"
    lms = _lists(out / "lms.csv")
    assert lms[0][-1] == "A1 (77)", "the score goes to the grade book's own column"
    assert lms[1][-1] == "7.0", "Ann's score"
    assert lms[2][-1] == "", "Cid submitted nothing: left blank"
    written = _dicts(out / "written.csv")
    assert written[0]["answer"] == "Because sines are bounded.", "the answer collected"
    assert written[1]["answer"] == "(no answer found)", "a broken notebook gives none"
    feedback = (out / "feedback" / "ann.md").read_text()
    assert "`ch09-bias-entry`: 0 of 2 points. Not yet." in feedback, "each exercise"
    assert "not marked yet" in feedback, "the written part, before marking"


def test_marks_filled_in_are_read_back(tmp_path):
    sheet = tmp_path / "written.csv"
    plan = a.parse(BASE)
    a.write_written(plan, {"ann": {"why": "text"}}, sheet)
    rows = _dicts(sheet)
    rows[0]["points"], rows[0]["comment"] = "6", "almost"
    with open(sheet, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    marks = a.read_marks(sheet)
    assert marks == {("ann", "why"): (6.0, "almost")}, "points and comment"
