"""Grade submitted chapter notebooks: ``make grade SUBMISSIONS=DIR``.

    python tools/grade.py DIR [--out _build/grades.csv] [--timeout 600] [--jobs 1]

``DIR/<student>/<chapter>.ipynb``, the chapters under their file names in ``book/`` (and
in the student edition), are graded into a CSV with the columns
``student,chapter,exercise,passed, feedback``: one row per exercise of each submitted
chapter (``passed`` is 1 or 0).

How a notebook is graded
------------------------
1. The grader (this process) reads the notebook as JSON (a file that does not parse
   fails all of its chapter's exercises) and adds a *capture cell* at the end of each
   exercise: just before the next exercise's statement, or at the end of the notebook.
   An exercise starts at its statement (the ``{exercise}`` block with its ``:label:``)
   or at the stub cell carrying the metadata ``{"exercise": label}``, whichever comes
   first.
2. A child process (``--run-box``), with CPU-time, memory and file-size limits
   (``resource.setrlimit``), runs the notebook cell by cell in a fresh kernel, in a
   temporary working folder. The kernel is started by ``tools/sandbox.py``: clean
   environment, no network, and (Landlock) no writes outside the working folder and no
   reads of this repository beyond the companion package. A cell that raises does not
   stop the run; a time out (``GRADE_TIMEOUT`` seconds for the notebook, default 600) or
   a dead kernel does.
3. A capture cell writes the names the exercise asks for as plain data (JSON and
   ``.npy``, :mod:`companion.exercises.wire`); for a function answer it calls the
   learner's function on inputs the grader drew with a seed the notebook never sees, and
   writes the outputs. Right after the capture cell, the child moves what it wrote out
   of the kernel's reach.
4. The grader reads those files (``allow_pickle=False``; no pickle, no code) and calls
   each exercise's checker itself, in its own process, which imported every checker
   before any submission ran. Nothing the kernel prints or redefines (``check_...``,
   ``Feedback``, ``numpy.allclose``) reaches it.

An exercise fails, with the reason in ``feedback``, if its answer is wrong or missing,
if a cell of its own part of the notebook raised, if a cell before the first exercise
raised, or if the notebook timed out or its kernel died before the exercise's capture
cell ran.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import csv
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

if sys.argv[1:2] != ["--run-box"]:  # the child that runs a notebook needs none of this
    import numpy as np

    import companion
    # every checker, imported before any submission runs
    from companion.exercises import registry, wire
    from companion.exercises.registry import CHAPTERS, Outcome

SANDBOX = Path(__file__).with_name("sandbox.py")
# The lab's trained runs and results (book/data), read-only: never book/ itself, which
# holds the chapters with their solutions.
LAB_DATA = ROOT / "book" / "data"
FIELDS = ["student", "chapter", "exercise", "passed", "feedback"]
MAX_NOTEBOOK_BYTES = 50 << 20
CAPTURE_KEY = "grader-capture"


@dataclass(frozen=True)
class Limits:
    # wall-clock seconds to run the notebook's cells (kernel start-up aside)
    timeout: float = 600.0
    # CPU seconds per process (0: twice the timeout plus 30 s, for two threads)
    cpu: int = 0
    memory_mb: int = 4096  # address space per process
    file_mb: int = 256  # largest file a process may write
    # grade although Landlock cannot confine the kernel's files (--unconfined)
    unconfined: bool = False

    @classmethod
    def from_env(cls) -> "Limits":
        env = os.environ
        return cls(
            float(env.get("GRADE_TIMEOUT", 600)),
            int(env.get("GRADE_CPU", 0)),
            int(env.get("GRADE_MEMORY_MB", 4096)),
            int(env.get("GRADE_FILE_MB", 256)),
        )

    def apply(self) -> None:
        """Called by the child at its start: the kernel it starts inherits these
        limits."""
        cpu = int(self.cpu or 2 * self.timeout + 30)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        memory = self.memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        size = self.file_mb << 20
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if os.geteuid() != 0:  # root is exempt from RLIMIT_NPROC
            import psutil

            uid = os.getuid()
            mine = sum(1 for q in psutil.process_iter(["uids"])
                       if q.info["uids"] and q.info["uids"].real == uid)
            limit = mine + MAX_PROCESSES
            resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
        # One core: the lab then trains in the kernel itself, without helper processes
        # (whose semaphores would need /dev/shm, outside the sandbox), and parallel
        # notebooks (--jobs) do not compete for cores. Its results are the same.
        if hasattr(os, "sched_setaffinity"):
            cores = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(0, {cores[os.getpid() % len(cores)]})


# ---- preparing a notebook (grader side, no code runs) --------------------------------

def exercise_starts(nb: dict, labels: list[str]) -> dict[str, int]:
    """Index of the cell where each exercise starts: its statement or its stub, if
    present."""
    starts: dict[str, int] = {}
    for i, cell in enumerate(nb["cells"]):
        source = _source(cell)
        found = [
            label
            for label in labels
            if f"{{exercise}}" in source and _labelled(source, label)
        ]
        meta = (
            cell.get("metadata", {}).get("exercise")
            if isinstance(cell.get("metadata"), dict)
            else None
        )
        if meta in labels:
            found.append(meta)
        for label in found:
            starts.setdefault(label, i)
    return starts


def _labelled(source: str, label: str) -> bool:
    return any(
        line.strip() == f":label: {label}"
        or line.strip().replace(" ", "") == f":label:{label}"
        for line in source.splitlines()
    )


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def capture_cell(label: str) -> dict:
    ex = registry.EXERCISES[label]
    call = ex.function.kernel_call if ex.function else None
    # wire.py is loaded from its file, fresh: whatever the notebook did to sys.modules,
    # and without importing companion.exercises (and torch) into a kernel that did not.
    code = (
        "def _grader_capture():\n"
        "    import importlib.util\n"
        "    spec = importlib.util.spec_from_file_location('_grader_wire', "
        f"{str(Path(wire.__file__))!r})\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(module)\n"
        f"    module.capture(globals(), {label!r}, {'_grader/' + label!r}, "
        f"{ex.names!r}, {call!r})\n"
        "_grader_capture()\n"
        "del _grader_capture"
    )
    return {"cell_type": "code", "execution_count": None, "id": f"grader-{label}"[:64],
            "metadata": {CAPTURE_KEY: label}, "outputs": [], "source": code}


def prepare(nb: dict, chapter: str) -> tuple[dict, dict[str, tuple[int, int]]]:
    """The notebook with a capture cell per exercise; and, per label, the (first, last)
    index of its own cells in the prepared notebook, capture cell included."""
    labels = [ex.label for ex in registry.chapter_exercises(chapter)]
    starts = exercise_starts(nb, labels)
    cells = [c for c in nb["cells"] if isinstance(c, dict)]
    for cell in cells:  # a submitted capture cell or forged metadata means nothing
        if isinstance(cell.get("metadata"), dict):
            cell["metadata"].pop(CAPTURE_KEY, None)
    boundaries = sorted(set(starts.values()))
    inserts: dict[int, list[str]] = {}
    for label in labels:
        if label in starts:
            later = [b for b in boundaries if b > starts[label]]
            at = later[0] if later else len(cells)
        else:
            at = len(cells)
        inserts.setdefault(at, []).append(label)
    out, spans, first = [], {}, {}
    for i in range(len(cells) + 1):
        for label in inserts.get(i, []):
            out.append(capture_cell(label))
            spans[label] = (first.get(label, len(out) - 1), len(out) - 1)
        if i < len(cells):
            for label, start in starts.items():
                if start == i:
                    first[label] = len(out)
            out.append(cells[i])
    for label in labels:
        if label not in starts:
            spans[label] = (spans[label][1], spans[label][1])
    prepared = dict(nb)
    prepared["cells"] = out
    return prepared, spans


def write_inputs(box: Path, chapter: str, rng) -> dict[str, tuple[int, list]]:
    """Inputs for the chapter's function answers, in ``box/inputs`` (out of the kernel's
    reach).

    Returns, per label, the number of public cases (the checker's own, replayed to it)
    and the secret cases with their right outputs, kept in this process."""
    plans = {}
    for ex in registry.chapter_exercises(chapter):
        if ex.function is None:
            continue
        public, secret = ex.function.public_cases(), ex.function.secret_cases(rng)
        folder = box / "inputs" / ex.label
        for i, (case, _) in enumerate(public + secret):
            wire.dump(case, folder / f"in{i}")
        plans[ex.label] = (len(public), secret)
    return plans


# ---- running a notebook (the child process) ------------------------------------------

def read_dirs() -> list[str]:
    """What the kernel may read: Python, its packages, the companion package, system
    files."""
    dirs = {
        sys.base_prefix,
        sys.prefix,
        sys.exec_prefix,
        str(Path(companion.__file__).parent),
        str(Path(sys.executable).resolve().parent),
        str(LAB_DATA),  # the lab's record, which chapters 11 to 16 read
    }
    dirs |= {p for p in sys.path if p and Path(p).is_dir() and "site-packages" in p}
    system = [
        "/usr",
        "/lib",
        "/lib64",
        "/lib32",
        "/bin",
        "/sbin",
        "/sys",
        "/dev/urandom",
        "/dev/random",
        "/dev/zero",
        "/proc",
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/localtime",
        "/etc/passwd",
        "/etc/group",
        "/etc/nsswitch.conf",
        "/etc/hosts",
        "/etc/fonts",
        "/etc/ssl",
        "/etc/mime.types",
    ]
    return sorted(dirs) + [p for p in system if Path(p).exists()]


def run_box(box: Path) -> None:
    """Child process: run ``box/prepared.ipynb`` in a sandboxed kernel, cell by cell."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    job = json.loads((box / "job.json").read_text(encoding="utf-8"))
    Limits(*job["limits"]).apply()  # before the kernel starts: it inherits them
    # Every process the notebook starts stays below this one, even one that forks
    # twice or calls setsid(): orphans are reparented here, not to init, so the end
    # of this run can find and kill them all.
    subreaper = _become_subreaper()
    cgroup = _join_pids_cgroup(box)  # a cap on tasks that holds for root too
    work = box / "work"
    (work / ".mpl").mkdir(parents=True, exist_ok=True)
    for cache in (
        Path(job["mpl_cache"]).glob("fontlist-*.json") if job["mpl_cache"] else []
    ):
        shutil.copy(cache, work / ".mpl" / cache.name)
    argv = [sys.executable, str(SANDBOX), "--work", str(work)]
    if job.get("require_landlock", True):
        argv.append("--require-landlock")
    for folder in job["read"]:
        argv += ["--read", folder]
    argv += [
        "--",
        sys.executable,
        "-m",
        "ipykernel_launcher",
        "-f",
        "{connection_file}",
    ]

    class Specs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(
                argv=argv,
                display_name="graded",
                language="python",
                resource_dir=str(box),
            )

    status: dict = {"errors": [], "ran": [], "stopped": None}

    def save():
        (box / "status.json").write_text(json.dumps(status), encoding="utf-8")

    nb = nbformat.reads(
        (box / "prepared.ipynb").read_text(encoding="utf-8"), as_version=4
    )
    km = AsyncKernelManager(
        kernel_name="graded",
        kernel_spec_manager=Specs(),
        transport="ipc",
        ip=str(work / "k"),
        connection_file=str(work / "kernel.json"),
    )
    client = NotebookClient(
        nb,
        km=km,
        timeout=max(1, int(job["timeout"])),
        allow_errors=True,
        record_timing=False,
        startup_timeout=120,
        resources={"metadata": {"path": str(work)}},
    )
    started = time.monotonic()
    if os.environ.get("GRADE_DEBUG"):
        import faulthandler

        faulthandler.dump_traceback_later(job["timeout"] + 10)
    try:
        with client.setup_kernel():
            # the notebook's time, from a ready kernel
            deadline = time.monotonic() + job["timeout"]
            if os.environ.get("GRADE_DEBUG"):
                print(
                    f"kernel started in {time.monotonic() - started:.2f} s",
                    file=sys.stderr,
                )
            if km.provisioner and getattr(km.provisioner, "process", None):
                (box / "kernel.pid").write_text(str(km.provisioner.process.pid))
            sandbox = work / ".sandbox"
            status["sandbox"] = (
                sandbox.read_text()[:500] if sandbox.is_file() else "unknown"
            ).strip() + f"\n{subreaper}\n{_process_limit_note(cgroup)}"
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                label = cell.metadata.get(CAPTURE_KEY)
                target = work / "_grader" / label if label else None
                if label:
                    shutil.rmtree(
                        target, ignore_errors=True
                    ) if target.is_dir() and not target.is_symlink() else (
                        target.unlink()
                        if target.is_symlink() or target.exists()
                        else None
                    )
                    if (box / "inputs" / label).is_dir():
                        shutil.copytree(box / "inputs" / label, target)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CellTimeoutError("time limit")
                client.timeout = max(1, int(remaining + 0.999))
                started = time.monotonic()
                client.execute_cell(cell, index)
                if os.environ.get("GRADE_DEBUG"):
                    print(
                        f"cell {index}: {time.monotonic() - started:.2f} s",
                        file=sys.stderr,
                    )
                error = next(
                    (o for o in cell.outputs if o.get("output_type") == "error"), None
                )
                if error is not None:
                    status["errors"].append(
                        {
                            "cell": index,
                            "error": f"{error.get('ename')}: {error.get('evalue')}"[
                                :400
                            ],
                        }
                    )
                if label:
                    captured = box / "captured" / label
                    captured.parent.mkdir(exist_ok=True)
                    if target.is_dir() and not target.is_symlink():
                        os.rename(target, captured)  # out of the kernel's reach
                    status["ran"].append(label)
                save()
    except (CellTimeoutError, TimeoutError):
        status["stopped"] = f"the notebook ran out of time (limit {job['timeout']:g} s)"
    except DeadKernelError as err:
        status["stopped"] = (
            f"the kernel died ({str(err)[:200]}); a memory or CPU limit may have "
            "stopped it"
        )
    except Exception as err:  # noqa: BLE001 - any other failure is the notebook's
        status["stopped"] = (
            f"the notebook could not run: {type(err).__name__}: {str(err)[:300]}"
        )
    finally:
        save()
        if km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)
        _kill_descendants(os.getpid())
        _leave_pids_cgroup(cgroup)


# ---- grading (grader side) -----------------------------------------------------------

@dataclass
class Row:
    student: str
    chapter: str
    exercise: str
    passed: bool
    feedback: str


def _outcomes(folder: Path, count: int, cases_status: list) -> list:
    outcomes = []
    for i in range(count):
        state = (
            cases_status[i]
            if i < len(cases_status) and isinstance(cases_status[i], str)
            else "did not run"
        )
        if state != "ok":
            outcomes.append(Outcome(state[:300]))
            continue
        try:
            outcomes.append(Outcome("ok", wire.load(folder / f"out{i}")))
        except wire.WireError as err:
            outcomes.append(Outcome(f"gave an output the grader cannot read ({err})"))
    return outcomes


def grade_capture(ex, folder: Path, plan) -> tuple[bool, str]:
    """Grade one exercise from what its capture cell wrote into ``folder``."""
    if folder.is_symlink() or not folder.is_dir():
        return False, "the grader found no answer (its capture cell did not write one)"
    status = wire.read_json(folder / "status.json")
    if not isinstance(status, dict) or status.get("label") != ex.label:
        return False, "the grader found no answer (its capture cell did not finish)"
    state = status.get("state")
    if state == "missing":
        return (
            False,
            f"not defined: {', '.join(map(str, status.get('missing', [])))[:200]} (the "
            f"exercise asks for {ex.name})",
        )
    if state == "error":
        return False, f"the answer could not be read: {str(status.get('error'))[:300]}"
    if state == "value" and ex.function is None:
        try:
            values = [wire.load(folder / f"value{j}") for j in range(len(ex.names))]
        except wire.WireError as err:
            return False, f"the answer could not be read: {err}"
        feedback = registry.grade_value(ex, *values)
    elif state == "function" and ex.function is not None and plan is not None:
        n_public, secret = plan
        cases = status.get("cases") if isinstance(status.get("cases"), list) else []
        outcomes = _outcomes(folder, n_public + len(secret), cases)
        feedback = registry.grade_function(
            ex, outcomes[:n_public], secret, outcomes[n_public:]
        )
    else:
        return False, "the grader found no answer"
    return bool(feedback.ok), repr(feedback)


def grade_notebook(
    student: str, path: Path, limits: Limits, tmp_root: str | None = None
) -> list[Row]:
    chapter = path.stem
    exercises = registry.chapter_exercises(chapter)

    def all_failed(reason: str) -> list[Row]:
        return [Row(student, chapter, ex.label, False, reason) for ex in exercises]

    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return all_failed(
                f"the notebook is larger than {MAX_NOTEBOOK_BYTES >> 20} MiB"
            )
        nb = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise ValueError("no list of cells")
        import nbformat

        nbformat.validate(nbformat.from_dict(nb), relax_add_props=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is the submission's
        return all_failed(
            f"the notebook does not parse: {type(err).__name__}: {str(err)[:200]}"
        )
    nb.setdefault("metadata", {})
    nb.setdefault("nbformat", 4)
    nb.setdefault("nbformat_minor", 5)
    prepared, spans = prepare(nb, chapter)
    box = Path(tempfile.mkdtemp(prefix="grade-", dir=tmp_root))
    try:
        (box / "work").mkdir()
        plans = write_inputs(box, chapter, np.random.default_rng(
            _input_seed(student, chapter)))
        (box / "prepared.ipynb").write_text(json.dumps(prepared), encoding="utf-8")
        (box / "job.json").write_text(
            json.dumps(
                {
                    "timeout": limits.timeout,
                    "limits": [
                        limits.timeout,
                        limits.cpu,
                        limits.memory_mb,
                        limits.file_mb,
                    ],
                    "read": read_dirs(),
                    "require_landlock": not limits.unconfined,
                    "mpl_cache": _mpl_cache(),
                }
            ),
            encoding="utf-8",
        )
        # stderr goes to a file, not a pipe: a process the notebook leaves behind
        # could hold a pipe open, and the grader would wait for it.
        with open(box / "stderr.txt", "wb") as err_file:
            child = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--run-box", str(box)],
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=err_file,
            )
        try:
            child.wait(timeout=limits.timeout + 180)  # start-up and shutdown
        except subprocess.TimeoutExpired:
            _kill(child.pid, box)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=30)
        _kill_kernel(box)
        _sweep(box)
        stderr = (box / "stderr.txt").read_bytes()[-20000:]
        if os.environ.get("GRADE_DEBUG") and stderr:
            sys.stderr.write(stderr.decode(errors="replace"))
        status = wire.read_json(box / "status.json") or {}
        if isinstance(status.get("sandbox"), str):
            PROTECTIONS.add(status["sandbox"])
        stopped = status.get("stopped")
        if not status and child.returncode:
            tail = (
                stderr.decode(errors="replace").strip().splitlines()[-1:]
                if stderr
                else []
            )
            stopped = (
                f"the grading process failed (exit {child.returncode}) "
                f"{' '.join(tail)[:300]}"
            )
        errors = (
            status.get("errors", []) if isinstance(status.get("errors"), list) else []
        )
        first_exercise = min((first for first, _ in spans.values()), default=0)
        rows = []
        for ex in exercises:
            first, last = spans[ex.label]
            own = [
                e
                for e in errors
                if isinstance(e, dict)
                and isinstance(e.get("cell"), int)
                and (first <= e["cell"] <= last or e["cell"] < first_exercise)
            ]
            folder = box / "captured" / ex.label
            if ex.label not in status.get("ran", []):
                rows.append(
                    Row(
                        student,
                        chapter,
                        ex.label,
                        False,
                        "not graded: "
                        f"{stopped or 'the notebook stopped before this exercise'}",
                    )
                )
            elif own:
                where = (
                    "a cell before the exercises"
                    if own[0]["cell"] < first_exercise
                    else "a cell of this exercise"
                )
                rows.append(
                    Row(
                        student,
                        chapter,
                        ex.label,
                        False,
                        f"{where} raised {own[0]['error']}",
                    )
                )
            else:
                try:
                    passed, feedback = grade_capture(ex, folder, plans.get(ex.label))
                except Exception as err:  # noqa: BLE001
                    # one exercise's trouble stops nothing
                    passed, feedback = (
                        False,
                        f"grader error: {type(err).__name__}: {str(err)[:300]}",
                    )
                rows.append(Row(student, chapter, ex.label, passed, feedback))
        return rows
    finally:
        shutil.rmtree(box, ignore_errors=True)


# The grader's secret: with it, each student's inputs are drawn from (secret, student,
# chapter), so a regrade of the same submissions draws the same inputs, and a notebook
# never sees them. Made once per checkout (or set GRADE_SECRET to share it).
SECRET_FILE = ROOT / "_build" / "grader-secret"


def _secret() -> bytes:
    if os.environ.get("GRADE_SECRET"):
        return os.environ["GRADE_SECRET"].encode()
    if not SECRET_FILE.is_file():
        SECRET_FILE.parent.mkdir(parents=True, exist_ok=True)
        SECRET_FILE.write_text(secrets.token_hex(32))
        SECRET_FILE.chmod(0o600)
    return SECRET_FILE.read_text().strip().encode()


def _input_seed(student: str, chapter: str) -> int:
    import hashlib

    digest = hashlib.sha256(_secret() + f"\0{student}\0{chapter}".encode()).digest()
    return int.from_bytes(digest[:16], "big")


PR_SET_CHILD_SUBREAPER = 36
# What each notebook's sandbox reported it applied, for the run's report.
PROTECTIONS: set[str] = set()
# Processes per sandboxed notebook (RLIMIT_NPROC counts the user's processes, so the
# limit is this many above those running when the notebook starts; root is exempt).
MAX_PROCESSES = 64


def _become_subreaper() -> str:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
            return "processes: every one the notebook starts is killed at its end"
    except (OSError, AttributeError):
        pass
    return "processes: not tracked (no PR_SET_CHILD_SUBREAPER); the sweep still runs"


# Tasks (processes and threads: PyTorch and the kernel run a few dozen) per notebook,
# in a cgroup of its own where the grader may make one.
MAX_TASKS = 512
PIDS_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))  # v1, then v2


def _join_pids_cgroup(box: Path) -> Path | None:
    """Move this process into a new pids cgroup capped at MAX_TASKS; None where the
    system does not let this user make one."""
    for root in PIDS_ROOTS:
        if not (root / "cgroup.procs").is_file():
            continue
        group = root / f"pe-grade-{os.getpid()}"
        try:
            group.mkdir()
        except OSError:
            continue
        try:
            (group / "pids.max").write_text(str(MAX_TASKS))
            (group / "cgroup.procs").write_text(str(os.getpid()))
            return group
        except OSError:
            with contextlib.suppress(OSError):
                group.rmdir()
    return None


def _leave_pids_cgroup(group: Path | None) -> None:
    """Kill whatever is left in the group (it holds only the notebook's processes and
    this one), move this process back out, and remove the group."""
    if group is None:
        return
    with contextlib.suppress(OSError, ValueError):
        for line in (group / "cgroup.procs").read_text().split():
            if int(line) != os.getpid():
                with contextlib.suppress(OSError):
                    os.kill(int(line), signal.SIGKILL)
    with contextlib.suppress(OSError):
        (group.parent / "cgroup.procs").write_text(str(os.getpid()))
    for _ in range(20):
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.1)


def _process_limit_note(cgroup: Path | None = None) -> str:
    if cgroup is not None:
        return f"process count: at most {MAX_TASKS} tasks (a pids cgroup of its own)"
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if os.geteuid() == 0:
        return "process count: not limited (running as root, exempt from RLIMIT_NPROC)"
    return f"process count: at most {soft} processes for this user"


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _kill_descendants(pid: int) -> None:
    import psutil

    for _ in range(3):  # a process may fork while its siblings are killed
        found = _descendants(pid)
        if not found:
            return
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(found, timeout=2)


def _sweep(box: Path) -> int:
    """Kill every process left that runs in ``box`` (its folder or its HOME there),
    whoever its parent is now; returns how many."""
    import psutil

    root, killed = str(box.resolve()), 0
    for process in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error):
            if process.pid == os.getpid():
                continue
            home = process.environ().get("HOME", "")
            if process.cwd().startswith(root) or home.startswith(root):
                process.kill()
                killed += 1
    return killed


def _kill(pid: int, box: Path) -> None:
    _kill_descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    _kill_kernel(box)


def _kill_kernel(box: Path) -> None:
    try:
        pid = int((box / "kernel.pid").read_text())
        os.killpg(pid, signal.SIGKILL)  # the kernel leads its own session
    except (OSError, ValueError):
        pass


_MPL: list = []


def _mpl_cache() -> str:
    if not _MPL:
        try:
            import matplotlib

            _MPL.append(matplotlib.get_cachedir())
        except Exception:  # noqa: BLE001
            _MPL.append("")
    return _MPL[0]


def submissions(folder: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """(student, notebook) pairs to grade, and warnings about files that are not
    chapters."""
    jobs, warnings = [], []
    chapters = set(CHAPTERS.values())
    for student in sorted(
        p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")
    ):
        for nb in sorted(student.glob("*.ipynb")):
            if nb.stem in chapters:
                jobs.append((student.name, nb))
            else:
                warnings.append(
                    f"{student.name}/{nb.name}: not a chapter file name, skipped"
                )
    return jobs, warnings


def grade(
    folder: Path, out: Path, limits: Limits, jobs: int = 1, progress: bool = True
) -> list[Row]:
    from tqdm import tqdm

    todo, warnings = submissions(folder)
    for warning in warnings:
        print("warning:", warning, file=sys.stderr)
    results: dict[int, list[Row]] = {}
    bar = tqdm(total=len(todo), unit="notebook", disable=not progress, file=sys.stderr)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {
            pool.submit(grade_notebook, student, nb, limits): i
            for i, (student, nb) in enumerate(todo)
        }
        for future in concurrent.futures.as_completed(futures):
            i = futures[future]
            student, nb = todo[i]
            try:
                results[i] = future.result()
            except Exception as err:  # noqa: BLE001 - grading goes on
                results[i] = [
                    Row(
                        student,
                        nb.stem,
                        ex.label,
                        False,
                        f"grader error: {type(err).__name__}: {err}",
                    )
                    for ex in registry.chapter_exercises(nb.stem)
                ]
            bar.set_postfix_str(f"{student}/{nb.stem}")
            bar.update()
    bar.close()
    rows = [row for i in range(len(todo)) for row in results[i]]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIELDS)
        for row in rows:
            writer.writerow(
                [row.student, row.chapter, row.exercise, int(row.passed), row.feedback]
            )
    print(summary(rows))
    print(f"{len(rows)} rows written to {out}")
    for report in sorted(PROTECTIONS):
        print("sandbox:", "; ".join(line for line in report.splitlines() if line))
    return rows


def summary(rows: list[Row]) -> str:
    lines = []
    for student in sorted({r.student for r in rows}):
        mine = [r for r in rows if r.student == student]
        chapters = sorted({r.chapter for r in mine})
        parts = [
            f"{c[:2]}: {sum(r.passed for r in mine if r.chapter == c)}/"
            f"{sum(r.chapter == c for r in mine)}"
            for c in chapters
        ]
        lines.append(
            f"{student}: {sum(r.passed for r in mine)}/{len(mine)} exercises passed "
            f"({', '.join(parts)})"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--run-box":
        run_box(Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "submissions",
        type=Path,
        help="a folder with one folder of notebooks per student",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "grades.csv")
    parser.add_argument(
        "--timeout",
        type=float,
        help="seconds per notebook (default: $GRADE_TIMEOUT or 600)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=int(os.environ.get("GRADE_JOBS", 1)),
        help="notebooks graded at once (default: $GRADE_JOBS or 1)",
    )
    parser.add_argument(
        "--unconfined",
        action="store_true",
        help="grade even where Linux Landlock is missing, so a notebook's code may "
        "read and write any file the grader can (each run's report says so)",
    )
    parser.add_argument(
        "--assignment", type=Path,
        help="an assignment file (tools/assignment.py): points, due date, late rule; "
        "then totals.csv, feedback/ and written.csv go next to --out",
    )
    parser.add_argument("--submitted", type=Path,
                        help="student,submitted_at (ISO 8601) for the late rule")
    parser.add_argument("--roster", type=Path,
                        help="the LMS grade book's CSV: writes lms.csv to import")
    parser.add_argument("--marks", type=Path,
                        help="written.csv with the written answers' points filled in")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    for name in ("submitted", "roster", "marks"):
        if getattr(args, name) and not args.assignment:
            parser.error(f"--{name} needs --assignment FILE")
    assignment = None
    if args.assignment:
        import assignment as assignments

        try:
            assignment = assignments.load(args.assignment)
            submitted = (assignments.read_submitted(args.submitted)
                         if args.submitted else None)
            marks = assignments.read_marks(args.marks) if args.marks else None
        except (assignments.AssignmentError, OSError) as err:
            parser.error(str(err))
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    sys.path.insert(0, str(SANDBOX.parent))
    from sandbox import landlock_abi

    if not args.unconfined and landlock_abi() < 1:
        parser.error(
            "this system has no Linux Landlock (5.13 or newer, enabled), so the "
            "sandbox cannot keep a notebook's code from the grader's files: grade on "
            "a system with it, or pass --unconfined (GRADE_UNCONFINED=1 with make "
            "grade) to grade anyway"
        )
    limits = Limits.from_env()
    limits = Limits(args.timeout or limits.timeout, limits.cpu, limits.memory_mb,
                    limits.file_mb, args.unconfined)
    rows = grade(args.submissions, args.out, limits, args.jobs, not args.no_progress)
    if assignment is not None:
        report_assignment(assignment, rows, args.submissions, args.out.parent,
                          submitted, marks, args.roster)


def report_assignment(assignment, rows, folder: Path, out: Path, submitted, marks,
                      roster) -> None:
    """totals.csv, feedback/<student>.md, written.csv (and lms.csv) into ``out``."""
    import assignment as assignments

    students = sorted({student for student, _ in submissions(folder)[0]})
    chapters = set(assignment_chapters(assignment))
    outside = sorted({r.exercise for r in rows} - set(assignment.points))
    if outside:
        print(f"note: graded but not in {assignment.name}, so worth 0: "
              f"{', '.join(outside[:8])}{' ...' if len(outside) > 8 else ''}")
    table = assignments.totals(rows, assignment, students, submitted, marks)
    assignments.write_totals(table, out / "totals.csv")
    assignments.write_feedback(rows, assignment, table, out / "feedback", marks)
    answers = {
        student: assignments.written_answers(
            sorted(p for p in (folder / student).glob("*.ipynb")
                   if p.stem in chapters or not chapters))
        for student in students
    }
    assignments.write_written(assignment, answers, out / "written.csv", marks)
    if assignment.due is not None and submitted is None:
        print("note: no --submitted times, so no late rule was applied")
    print(f"{assignment.name}: totals in {out / 'totals.csv'}, feedback in "
          f"{out / 'feedback'}, written answers to mark in {out / 'written.csv'}")
    if roster:
        missing = assignments.write_lms(table, assignment, roster, out / "lms.csv")
        print(f"grade book to import: {out / 'lms.csv'}")
        if missing:
            print("warning: not on the roster, so not in lms.csv:", ", ".join(missing))


def assignment_chapters(assignment) -> list[str]:
    return sorted({registry.EXERCISES[label].chapter for label in assignment.points})


if __name__ == "__main__":
    main()
