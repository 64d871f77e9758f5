"""The learner's tooling: LAB_SEEDS's errors, make execute's copy of the lab's results,
the stream outputs it stores, and make bench's rows when it is stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from companion import lab
from companion.lab_record import record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import notebooks  # noqa: E402

FORM = r"LAB_SEEDS must be comma-separated integers 0 or more, e\.g\. LAB_SEEDS=5,6,"


@pytest.mark.parametrize("value, seeds", [
    (None, lab.DEFAULT_SEEDS), ("", lab.DEFAULT_SEEDS), ("5,6,7,8,9", (5, 6, 7, 8, 9)),
    (" 5, 6 ", (5, 6)), ("11", (11,)),
])
def test_lab_seeds_read(value, seeds, monkeypatch):
    monkeypatch.delenv("LAB_SEEDS", raising=False)
    got = lab.seeds_from_environment(value)
    assert got == seeds, f"LAB_SEEDS={value!r} reads as {seeds}, not {got}"


@pytest.mark.parametrize("value", ["5 6 7 8 9", "5,6,", "5;6", "-1,2", "a", "5,²"])
def test_lab_seeds_malformed(value):
    with pytest.raises(ValueError, match=FORM):
        lab.seeds_from_environment(value)


def test_lab_seeds_repeated():
    with pytest.raises(ValueError, match="LAB_SEEDS must name each seed once"):
        lab.seeds_from_environment("5,5")


def test_lab_seeds_malformed_at_import():
    env = {**os.environ, "LAB_SEEDS": "5 6 7 8 9"}
    done = subprocess.run([sys.executable, "-c", "import companion.lab"], env=env,
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0, "importing companion.lab with a bad LAB_SEEDS fails"
    last = done.stderr.strip().splitlines()[-1]
    assert "LAB_SEEDS must be comma-separated integers" in last, (
        f"the error names LAB_SEEDS and its form: {last}")


ENTRY = {"seeds": [0, 1], "lens": [4, 8], "floor_by_length": {4: 1.5, 8: 1.25},
         "loss": {"rope": [[1.75, 2.0], [1.8, 2.1]]}}


def test_results_copy_leaves_the_record_alone(tmp_path, monkeypatch):
    path, copy = tmp_path / "results.json", tmp_path / "copy.json"
    path.write_text(json.dumps({"ch12": ENTRY, "ch13": {"kept": 1}}))
    before = path.read_text()
    monkeypatch.delenv("LAB_SEEDS", raising=False)
    monkeypatch.delenv("LAB_RECORD", raising=False)
    monkeypatch.setenv("LAB_RESULTS_COPY", str(copy))
    drifted = {**ENTRY, "loss": {"rope": [[1.76, 2.0], [1.8, 2.1]]}}
    assert record("ch12", drifted, path=path), "results within tolerance pass"
    assert path.read_text() == before, "no LAB_RECORD=1: the record is not rewritten"
    written = json.loads(copy.read_text())
    first = written["ch12"]["loss"]["rope"][0][0]
    assert first == 1.76, f"the copy has this run's numbers, not {first}"
    assert written["ch13"] == {"kept": 1}, "the copy keeps the other chapters' entries"


def _stream(text: str, name: str = "stdout"):
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_merge_streams():
    figure = nbformat.v4.new_output("display_data", data={"text/plain": "<Figure>"})
    outputs = [_stream("a: 1.80"), _stream("5\n"), _stream("oops\n", "stderr"),
               _stream("b\n"), figure, _stream("c\n"), _stream("d\n")]
    merged = notebooks.merge_streams(outputs)
    texts = [(o.get("name"), o.get("text")) for o in merged]
    assert texts == [("stdout", "a: 1.805\n"), ("stderr", "oops\n"), ("stdout", "b\n"),
                     (None, None), ("stdout", "c\nd\n")], (
        f"only neighbouring streams of one name merge, in order: {texts}")


SLOW = """import os, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open("pids.txt", "w").write(f"{os.getpid()} {worker.pid}")
time.sleep(120)"""


def _notebook(path: Path, source: str) -> Path:
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]),
                   path)
    return path


def _gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX only")
def test_bench_stopped_keeps_its_rows_and_kills_the_kernel(tmp_path):
    fast = _notebook(tmp_path / "fast.ipynb", "print(1 + 1)")
    slow = _notebook(tmp_path / "slow.ipynb", SLOW)
    bench = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "notebooks.py"), "bench", fast.name,
         slow.name], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )
    pids = tmp_path / "pids.txt"
    deadline = time.monotonic() + 120
    while not (pids.is_file() and pids.read_text()) and time.monotonic() < deadline:
        assert bench.poll() is None, f"bench ended early: {bench.stdout.read()}"
        time.sleep(0.2)
    kernel, worker = (int(pid) for pid in pids.read_text().split())
    bench.send_signal(signal.SIGTERM)
    output, _ = bench.communicate(timeout=30)
    table = (tmp_path / "_build" / "bench.md").read_text()
    assert bench.returncode == 128 + signal.SIGTERM, f"bench exits: {output}"
    assert "| fast.ipynb |" in table, f"the finished notebook's row is kept: {table}"
    assert "slow.ipynb" not in table, f"the unfinished notebook has no row: {table}"
    assert "stopped by SIGTERM" in table, f"the table says it was stopped: {table}"
    assert "| fast.ipynb |" in output, f"each row is printed when measured: {output}"
    assert _gone(kernel), "the stopped notebook's kernel is killed"
    assert _gone(worker), "the process the kernel started is killed"


def test_claims_lists_each_failing_cell_with_its_message(tmp_path):
    cells = ["x = 1", 'assert x == 2, "x is 2 for the chapter\'s d = 16"', "y = x + 2",
             'assert y == 3, "y follows x"']
    nb = tmp_path / "claims.ipynb"
    nbformat.write(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in cells]), nb)
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "notebooks.py"), "claims", nb.name],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1, f"a failing cell makes claims exit 1: {done.stdout}"
    assert "1 failing cell " in done.stdout, f"it counts them: {done.stdout}"
    assert "cell 1: AssertionError: x is 2 for the chapter's d = 16" in done.stdout, (
        f"it names the cell and the claim: {done.stdout}")
    assert "cell 3" not in done.stdout, f"later cells still run, and pass: {done.stdout}"
    assert json.loads(nb.read_text())["cells"][1]["outputs"] == [], "it writes nothing"
