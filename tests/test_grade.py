"""The grader (tools/grade.py) on synthetic submissions, and its Gradescope export.

Two grading runs, each module-scoped, keep the cost down (about 40 s in all, most of it
kernels starting and importing torch): one with a generous time limit for complete, empty,
function-answer and tampering submissions, and one with a short limit for the broken ones.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import grade  # noqa: E402
import student  # noqa: E402
from sandbox import landlock_abi  # noqa: E402

OUTSIDE = ROOT / "_build" / "grader-escape.txt"  # a file no submission may write
UNCONFINED = landlock_abi() < 1  # grade without Landlock only where it is missing


def notebook(*cells) -> nbformat.NotebookNode:
    """A notebook of code cells; ``(label, source)`` marks an exercise's cell as the stub does."""
    nb = nbformat.v4.new_notebook()
    for cell in cells:
        label, source = cell if isinstance(cell, tuple) else (None, cell)
        nb.cells.append(nbformat.v4.new_code_cell(source, metadata={"exercise": label} if label else {}))
    return nb


def write(folder: Path, student_name: str, chapter: str, nb) -> None:
    (folder / student_name).mkdir(parents=True, exist_ok=True)
    target = folder / student_name / f"{chapter}.ipynb"
    if isinstance(nb, str):
        target.write_text(nb)
    else:
        nbformat.write(nb, target)


PERMUTED = "def permuted_weights(weights, perm):\n    return weights[:, :, perm][:, :, :, perm]"
PROBE = """import torch

def probe(layer, dim, seq=7):
    param = next(layer.parameters(), None)
    dtype = torch.float64 if param is None else param.dtype
    tokens = torch.randn(2, seq, dim, dtype=dtype)
    swap = torch.tensor([1, 0, *range(2, seq)])
    shift = torch.roll(torch.arange(seq), 1)
    with torch.no_grad():
        for perm in (swap, shift):
            lhs, rhs = layer(tokens[:, perm]), layer(tokens)[:, perm]
            tol = 100 * torch.finfo(dtype).eps * (1 + rhs.abs().max())
            if (lhs - rhs).abs().max() > tol:
                return False
    return True"""

# Right on the checker's own inputs (4 and 5 tokens), wrong on any other length.
PERMUTED_FOR_THE_CHECKER_ONLY = """def permuted_weights(weights, perm):
    if weights.shape[-1] in (4, 5):
        return weights[:, :, perm][:, :, :, perm]
    return weights"""

TAMPER = """import numpy as np
import companion.exercises as ex
from companion.exercises import _feedback, ch09

always = lambda *args, **kwargs: _feedback.Feedback(True, "patched")
for name in ("check_alibi_slopes_12", "check_alibi_bias_entry", "check_alibi_half_lives"):
    setattr(ex, name, always)
    setattr(ch09, name, always)
np.allclose = lambda *args, **kwargs: True
np.isclose = lambda *args, **kwargs: True
_feedback.Feedback.__bool__ = lambda self: True"""


@pytest.fixture(scope="module")
def student_notebooks(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    student.build_notebooks([ROOT / "book" / "09_alibi.ipynb"], out)
    return out


def read_rows(path: Path) -> dict[tuple[str, str], dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {(r["student"], r["exercise"]): r for r in rows}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, student_notebooks):
    subs = tmp_path_factory.mktemp("subs")
    shutil.copy(ROOT / "book" / "09_alibi.ipynb", subs)  # a stray file at the top: ignored
    write(subs, "alice", "09_alibi", nbformat.read(ROOT / "book" / "09_alibi.ipynb", as_version=4))
    write(subs, "bob", "09_alibi", nbformat.read(student_notebooks / "09_alibi.ipynb", as_version=4))
    write(subs, "carol", "01_why_order", notebook(
        ("ch01-permuted-weights", PERMUTED), ("ch01-pooled-groups", "labels = [0, 0, 2, 0, 2, 5]"),
        ("ch01-distinct-orderings", "answer = (1, 12)"), ("ch01-equivariance-probe", PROBE)))
    write(subs, "dave", "01_why_order", notebook(
        ("ch01-permuted-weights", PERMUTED_FOR_THE_CHECKER_ONLY),
        ("ch01-equivariance-probe", "import numpy as np, companion.exercises as ex\n"
                                    "from companion.exercises._feedback import Feedback\n"
                                    "ex.check_equivariance_probe = lambda fn: Feedback(True, 'patched')\n"
                                    "np.allclose = lambda *a, **k: True\n"
                                    "def probe(layer, dim):\n    return True")))
    write(subs, "eve", "09_alibi", notebook(
        TAMPER, ("ch09-slopes-12", "answer = np.zeros(12)"), ("ch09-bias-entry", "answer = 0.0"),
        ("ch09-half-lives", "answer = np.ones(16)\nassert ex.check_alibi_half_lives(answer)")))
    write(subs, "frank", "09_alibi", notebook(
        ("ch09-slopes-12", f"open({str(OUTSIDE)!r}, 'w').write('escaped')\nanswer = 1"),
        ("ch09-bias-entry", f"answer = open({str(ROOT / 'book' / '09_alibi.ipynb')!r}).read()"),
        ("ch09-half-lives", "import numpy as np\nblocks = []\nwhile True:\n    blocks.append(np.empty(1 << 27))")))
    OUTSIDE.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no _build yet
    OUTSIDE.unlink(missing_ok=True)
    out = subs / "grades.csv"
    write(subs, "alice", "11_current_models",  # a lab chapter: it reads book/data
          nbformat.read(ROOT / "book" / "11_current_models.ipynb", as_version=4))
    rows = grade.grade(subs, out, grade.Limits(timeout=120, unconfined=UNCONFINED),
                       progress=False)
    return rows, read_rows(out)


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    subs = tmp_path_factory.mktemp("broken")
    write(subs, "a-loop", "09_alibi", notebook("while True:\n    pass", ("ch09-slopes-12", "answer = 1")))
    write(subs, "b-syntax", "09_alibi", notebook("import numpy as np\nanswer = np.array([1, 2", ("ch09-slopes-12", "answer = 1")))
    write(subs, "c-garbled", "09_alibi", '{"cells": [ this is not JSON')
    write(subs, "c-garbled", "notes", "not a chapter")
    out = subs / "grades.csv"
    grade.grade(subs, out, grade.Limits(timeout=3, unconfined=UNCONFINED), progress=False)
    return read_rows(out)


def test_csv_has_one_row_per_exercise_of_each_submitted_chapter(graded):
    _, rows = graded
    assert len([r for r in rows if r[0] == "alice"]) == 6 and len([r for r in rows if r[0] == "carol"]) == 4
    assert len([r for r in rows if r[0] == "dave"]) == 4  # every exercise of the chapter, answered or not
    assert all(set(r) == set(grade.FIELDS) for r in rows.values())


def test_the_book_scores_every_exercise(graded):
    _, rows = graded
    for label in ("ch09-slopes-12", "ch09-bias-entry", "ch09-half-lives"):
        assert rows[("alice", label)]["passed"] == "1", rows[("alice", label)]["feedback"]
        assert rows[("alice", label)]["feedback"].startswith("Correct.")


def test_untouched_student_notebook_scores_none(graded):
    _, rows = graded
    bob = {k: v for k, v in rows.items() if k[0] == "bob"}
    assert len(bob) == 3 and all(r["passed"] == "0" for r in bob.values())
    assert all(r["feedback"].startswith("Not yet.") for r in bob.values())  # graded, not crashed


def test_function_answers_run_on_the_graders_inputs(graded):
    _, rows = graded
    for label in ("ch01-permuted-weights", "ch01-pooled-groups", "ch01-distinct-orderings", "ch01-equivariance-probe"):
        assert rows[("carol", label)]["passed"] == "1", rows[("carol", label)]["feedback"]
    cheat = rows[("dave", "ch01-permuted-weights")]
    assert cheat["passed"] == "0" and "passes the book's checker but not" in cheat["feedback"]


def test_patching_checkers_or_allclose_in_the_kernel_changes_nothing(graded):
    _, rows = graded
    patched = rows[("dave", "ch01-equivariance-probe")]
    assert patched["passed"] == "0" and "patched" not in patched["feedback"]
    for label in ("ch09-slopes-12", "ch09-bias-entry"):
        assert rows[("eve", label)]["passed"] == "0"
        assert rows[("eve", label)]["feedback"].startswith("Not yet."), rows[("eve", label)]["feedback"]
    assert rows[("eve", "ch09-half-lives")]["passed"] == "0"


@pytest.mark.skipif(landlock_abi() < 1, reason="needs Linux Landlock to confine file access")
def test_writing_or_reading_outside_the_working_folder_is_stopped(graded):
    _, rows = graded
    assert not OUTSIDE.exists()
    for label in ("ch09-slopes-12", "ch09-bias-entry"):
        assert rows[("frank", label)]["passed"] == "0"
        assert "PermissionError" in rows[("frank", label)]["feedback"], rows[("frank", label)]["feedback"]


def test_allocating_without_bound_is_stopped(graded):
    _, rows = graded
    row = rows[("frank", "ch09-half-lives")]
    assert row["passed"] == "0"
    assert "MemoryError" in row["feedback"] or "kernel died" in row["feedback"], row["feedback"]


def test_broken_notebooks_fail_and_grading_goes_on(broken):
    loop, syntax, garbled = (broken[(s, "ch09-slopes-12")] for s in ("a-loop", "b-syntax", "c-garbled"))
    assert loop["passed"] == "0" and "ran out of time" in loop["feedback"]
    assert syntax["passed"] == "0" and "SyntaxError" in syntax["feedback"]
    assert garbled["passed"] == "0" and "does not parse" in garbled["feedback"]
    assert len(broken) == 9  # three students, three exercises each; "notes" was skipped


def test_summary_per_student(graded):
    rows, _ = graded
    text = grade.summary(rows)
    assert "alice: 6/6 exercises passed (09: 3/3, 11: 3/3)" in text, text
    assert "bob: 0/3" in text, text


def test_gradescope_results_from_grades(graded, tmp_path):
    from gradescope import results

    _, rows = graded
    csv_path = tmp_path / "grades.csv"
    with csv_path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(grade.FIELDS)
        for (name, label), row in rows.items():
            if name == "alice":
                writer.writerow([row[f] for f in grade.FIELDS])
    data = results.results_from_csv(csv_path)
    assert data["score"] == 6, "one point per exercise alice passed, in 09 and 11"
    assert len(data["tests"]) == 6, "one test per exercise"
    assert all(t["status"] == "passed" and t["max_score"] == 1 for t in data["tests"])


def test_gradescope_run_autograder_end_to_end(tmp_path):
    """run_autograder as Gradescope runs it, with /autograder replaced by a temporary folder."""
    root = tmp_path / "autograder"
    (root / "submission" / "work").mkdir(parents=True)
    nbformat.write(notebook(("ch09-slopes-12", "answer = 1"),
                            ("ch09-half-lives", "import numpy as np\n"
                                                "answer = np.log(2) / 2.0 ** (-np.arange(1, 17) / 2)")),
                   root / "submission" / "work" / "09_alibi.ipynb")
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), GRADER_SOURCE=str(ROOT), GRADE_TIMEOUT="60",
               PYTHON=sys.executable)
    subprocess.run(["bash", str(ROOT / "tools" / "gradescope" / "run_autograder")], env=env, check=True,
                   capture_output=True, timeout=180)
    data = json.loads((root / "results" / "results.json").read_text())
    by_name = {t["name"]: t for t in data["tests"]}
    assert by_name["09_alibi: ch09-half-lives"]["score"] == 1
    assert by_name["09_alibi: ch09-slopes-12"]["score"] == 0
    assert by_name["09_alibi: ch09-bias-entry"]["score"] == 0 and data["score"] == 1


def test_feedback_reads_as_a_sentence_and_folds_in_a_notebook():
    from IPython.lib.pretty import pretty

    from companion.exercises._feedback import wrong

    feedback = wrong("the wavelength of pair i is 2*pi / w_i; " + "which pair is slowest? " * 6)
    assert repr(feedback).startswith("Not yet. The wavelength")
    assert "\n" not in repr(feedback)  # the grader's CSV keeps one line
    assert max(len(line) for line in pretty(feedback).split("\n")) <= 88
    assert repr(wrong("interleaved_to_halves is the inverse")).startswith("Not yet. interleaved_")


def test_a_lab_chapter_is_graded_and_the_book_scores_full_marks(graded):
    _, rows = graded
    for label in ("ch11-mrope-ids", "ch11-longrope-factor", "ch11-mla-cache"):
        assert rows[("alice", label)]["passed"] == "1", rows[("alice", label)]["feedback"]


ESCAPE = """import os, time
if os.fork() == 0:          # a child that leaves the session and forks again
    os.setsid()
    if os.fork() == 0:
        time.sleep(100000)
    os._exit(0)
for _ in range(20):         # and twenty children that sleep
    if os.fork() == 0:
        time.sleep(100000)
answer = 1"""


def _left_in_boxes() -> list:
    import psutil

    left = []
    for process in psutil.process_iter(["pid"]):
        try:
            if "/grade-" in process.environ().get("HOME", ""):
                left.append(process.pid)
        except psutil.Error:
            pass
    return left


def test_processes_a_submission_leaves_are_killed_and_grading_goes_on(tmp_path):
    write(tmp_path, "mallory", "09_alibi", notebook(("ch09-slopes-12", ESCAPE)))
    write(tmp_path, "zoe", "09_alibi", notebook(("ch09-slopes-12", "answer = 1")))
    started = time.monotonic()
    grade.grade(tmp_path, tmp_path / "grades.csv",
                grade.Limits(timeout=20, unconfined=UNCONFINED), progress=False)
    rows = read_rows(tmp_path / "grades.csv")
    assert time.monotonic() - started < 90, "one submission does not stall the class"
    assert ("zoe", "ch09-slopes-12") in rows, "the next student is graded"
    assert rows[("mallory", "ch09-slopes-12")]["passed"] == "0"
    assert not _left_in_boxes(), "no process of a submission outlives its grading"


def test_grading_without_landlock_needs_a_flag(monkeypatch, tmp_path, capsys):
    import sandbox

    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)
    monkeypatch.setattr(sys, "argv", ["grade.py", str(tmp_path)])
    with pytest.raises(SystemExit):
        grade.main()
    assert "--unconfined" in capsys.readouterr().err, "the error names the flag"


def test_regrades_draw_the_same_inputs_and_students_draw_their_own(monkeypatch):
    monkeypatch.setenv("GRADE_SECRET", "course-2027")
    first = grade._input_seed("ann", "01_why_order")
    assert grade._input_seed("ann", "01_why_order") == first, "a regrade: same inputs"
    assert grade._input_seed("ben", "01_why_order") != first, "each student their own"
    monkeypatch.setenv("GRADE_SECRET", "another course")
    assert grade._input_seed("ann", "01_why_order") != first, "the secret decides them"


FORK_BOMB = """
import os, sys, time
sys.path.insert(0, {tools!r})
import grade
group = grade._join_pids_cgroup(None)
if group is None:
    print("none")
    sys.exit(0)
forks = 0
for _ in range(3 * grade.MAX_TASKS):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError:
        break
    forks += 1
grade._leave_pids_cgroup(group)
print(forks, group.exists())
"""


def test_a_pids_cgroup_caps_a_fork_bomb_where_the_system_allows_one():
    import subprocess

    script = FORK_BOMB.format(tools=str(ROOT / "tools"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True,
                          text=True, timeout=120)
    if done.stdout.strip() == "none":
        pytest.skip("no pids cgroup can be made here (the grader's report says so)")
    forks, left = done.stdout.split()
    assert int(forks) < grade.MAX_TASKS, f"forking stops at the cap ({forks} forks)"
    assert left == "False", "the group is removed, its processes killed"
