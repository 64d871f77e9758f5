"""Execute the book's notebooks: store their outputs, or time them.

    python tests/notebooks.py execute book/03_formula.ipynb ...  # run in place
    python tests/notebooks.py bench book/*.ipynb                 # seconds per notebook
    python tests/notebooks.py claims book/13_add_or_concat.ipynb # which asserts fail

Both run each notebook top to bottom in a fresh kernel of *this* Python environment
(the kernel ``pytest --nbval --nbval-current-env`` uses), from the notebook's folder.
``execute`` stores the outputs with each run of stream outputs merged into one (the
kernel splits what a cell prints wherever its buffer happened to be flushed), so an
unchanged notebook is stored unchanged.

``bench`` times each notebook as a newcomer would: a new process that starts Python, the
notebook machinery and a kernel, runs every cell and exits, timed from outside. Each row
goes to ``_build/bench.md`` and to stdout as soon as it is measured, so a run stopped
early keeps what it measured. Ctrl-C or SIGTERM stops it, and with it the notebook's
process, its kernel and every process the kernel started (the lab's workers).

``claims`` runs each notebook to the end even where a cell fails, writes nothing, and
lists every cell that failed with its error's message: the claim an assert names. Run it
after changing the environment (``LAB_SEEDS=5,6,7,8,9``) or a copy of a chapter; it
exits 1 if any cell failed.

The kernel talks to this process over CurveZMQ-encrypted sockets where pyzmq supports
them (``KernelManager.transport_encryption``), so it does not warn about plain TCP.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import zmq
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbval.kernel import CURRENT_ENV_KERNEL_NAME, NbvalKernelspecManager

KERNELSPEC = {
    "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"
}
BENCH = Path("_build") / "bench.md"
STOP_SIGNALS = [signal.SIGINT] + [signal.SIGTERM] * hasattr(signal, "SIGTERM")


def kill_tree(pid: int, *, with_root: bool = True) -> None:
    """Kill a process and everything below it: each process group among them (the
    kernel runs in its own, with the lab's workers), then every process one by one."""
    try:
        root = psutil.Process(pid)
        tree = root.children(recursive=True) + ([root] if with_root else [])
    except psutil.Error:
        return
    for process in tree:
        with contextlib.suppress(OSError, AttributeError):
            if os.getpgid(process.pid) == process.pid and process.pid != os.getpid():
                os.killpg(process.pid, signal.SIGKILL)
    for process in tree:
        with contextlib.suppress(psutil.Error):
            if process.pid != os.getpid():
                process.kill()


def _kill_on_stop(km: KernelManager):
    """A notebook-start hook: on Ctrl-C or SIGTERM, kill the kernel and everything it
    started, then exit. It replaces nbclient's handlers, which the event loop runs only
    once the cell has finished, and which then leave the notebook's run to fail."""

    def stop(signum, frame) -> None:
        kill_tree(os.getpid(), with_root=False)
        with contextlib.suppress(OSError, TypeError):
            os.remove(km.connection_file)
        os._exit(128 + signum)

    def hook(notebook) -> None:
        for signum in STOP_SIGNALS:
            with contextlib.suppress(ValueError):  # only the main thread may
                signal.signal(signum, stop)

    return hook


def run(path: Path, allow_errors: bool = False) -> tuple[nbformat.NotebookNode, float]:
    """Execute one notebook in a fresh kernel; return it and the wall-clock seconds.
    With ``allow_errors``, a failing cell does not stop the run."""
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(
        kernel_name=CURRENT_ENV_KERNEL_NAME,
        kernel_spec_manager=NbvalKernelspecManager(),
        transport_encryption="auto" if zmq.has("curve") else "disabled",
    )
    client = NotebookClient(
        nb, km=km, timeout=600, record_timing=False, allow_errors=allow_errors,
        resources={"metadata": {"path": str(path.parent)}},
        on_notebook_start=_kill_on_stop(km),
    )
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return nb, time.perf_counter() - start


def merge_streams(outputs: list) -> list:
    """The outputs with each run of consecutive same-named stream outputs merged."""
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (
            output.output_type == "stream"
            and previous is not None
            and previous.output_type == "stream"
            and previous.name == output.name
        ):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


def execute(paths: list[Path]) -> None:
    for path in paths:
        nb, seconds = run(path)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = merge_streams(cell.outputs)
        nb.metadata["kernelspec"] = KERNELSPEC
        nb.metadata.pop("widgets", None)
        nbformat.write(nb, path)
        print(f"{path}: executed in {seconds:.1f} s")


class _Stopped(Exception):
    pass


def _raise_stopped(signum, frame):
    raise _Stopped(signum)


def _emit(out, line: str) -> None:
    out.write(line + "\n")
    out.flush()
    print(line, flush=True)


def bench(paths: list[Path]) -> None:
    threads = os.environ.get("OMP_NUM_THREADS", "default")
    BENCH.parent.mkdir(exist_ok=True)
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in STOP_SIGNALS}
    process = None
    with BENCH.open("w", encoding="utf-8") as out:
        try:
            _emit(out, f"{os.cpu_count()} CPUs, OMP_NUM_THREADS={threads}; each "
                       "notebook in a new process, start-up included\n")
            _emit(out, "| notebook | seconds |")
            _emit(out, "|---|---:|")
            total = 0.0
            for path in paths:
                start = time.perf_counter()
                process = subprocess.Popen(
                    [sys.executable, __file__, "run", str(path)], start_new_session=True
                )
                code = process.wait()
                seconds = time.perf_counter() - start
                if code != 0:
                    _emit(out, f"\n({path.name} failed with exit code {code})")
                    raise SystemExit(f"{path} failed (exit code {code}); see its error")
                total += seconds
                _emit(out, f"| {path.name} | {seconds:.1f} |")
            _emit(out, f"| **total** | **{total:.1f}** |\n")
        except _Stopped as stopped:
            signum = stopped.args[0]
            if process is not None:
                kill_tree(process.pid)
                process.wait()
            name = signal.Signals(signum).name
            _emit(out, f"\n(stopped by {name}; each row above is a complete run)")
            print(f"(written to {BENCH})", flush=True)
            raise SystemExit(128 + signum) from None
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    print(f"(written to {BENCH})")


def claims(paths: list[Path]) -> None:
    """Run each notebook through, and list the cells that failed with their messages."""
    failed = 0
    for path in paths:
        nb, seconds = run(path, allow_errors=True)
        errors = [
            (index, output)
            for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for output in cell.outputs if output.output_type == "error"
        ]
        cells = "cell" if len(errors) == 1 else "cells"
        print(f"{path}: {len(errors)} failing {cells} ({seconds:.0f} s)")
        for index, output in errors:  # NumPy's comparisons: their message, no arrays
            lines = [line for line in output.evalue.splitlines() if line.strip()]
            shown = " / ".join(lines[:3]) + (" ..." if len(lines) > 3 else "")
            print(f"  cell {index}: {output.ename}: {shown}")
        failed += len(errors)
    sys.exit(1 if failed else 0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["execute", "bench", "run", "claims"])
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args()
    missing = [str(path) for path in args.notebooks if not path.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}; give book/NN_name.ipynb")
    run_only = lambda paths: [run(p) for p in paths]  # noqa: E731 - what bench times
    commands = {"execute": execute, "bench": bench, "run": run_only, "claims": claims}
    commands[args.command](args.notebooks)


if __name__ == "__main__":
    main()
