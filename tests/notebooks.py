"""Execute the book's notebooks: store their outputs, or time them.

    python tests/notebooks.py execute book/03_formula.ipynb ...   # run in place, keep outputs
    python tests/notebooks.py bench book/*.ipynb                  # seconds per notebook

Both run each notebook top to bottom in a fresh kernel of *this* Python environment
(the same kernel ``pytest --nbval --nbval-current-env`` uses), from the notebook's folder.
``bench`` times each notebook as a newcomer would: a new process that starts Python, the
notebook machinery and a kernel, runs every cell and exits, timed from outside.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbval.kernel import CURRENT_ENV_KERNEL_NAME, NbvalKernelspecManager

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def run(path: Path) -> tuple[nbformat.NotebookNode, float]:
    """Execute one notebook in a fresh kernel; return it and the wall-clock seconds."""
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name=CURRENT_ENV_KERNEL_NAME, kernel_spec_manager=NbvalKernelspecManager())
    client = NotebookClient(
        nb, km=km, timeout=600, record_timing=False, resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return nb, time.perf_counter() - start


def execute(paths: list[Path]) -> None:
    for path in paths:
        nb, seconds = run(path)
        nb.metadata["kernelspec"] = KERNELSPEC
        nb.metadata.pop("widgets", None)
        nbformat.write(nb, path)
        print(f"{path}: executed in {seconds:.1f} s")


def bench(paths: list[Path]) -> None:
    rows = []
    for path in paths:
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "run", str(path)], check=True)
        seconds = time.perf_counter() - start
        rows.append((path.name, seconds))
        print(f"{path.name}: {seconds:.1f} s", file=sys.stderr)
    threads = os.environ.get("OMP_NUM_THREADS", "default")
    lines = [
        f"| notebook | seconds |",
        "|---|---:|",
        *[f"| {name} | {seconds:.1f} |" for name, seconds in rows],
        f"| **total** | **{sum(s for _, s in rows):.1f}** |",
        "",
        f"{os.cpu_count()} CPUs, OMP_NUM_THREADS={threads}; each notebook in a new process, start-up included",
        "",
    ]
    table = "\n".join(lines)
    out = Path("_build") / "bench.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(table + "\n")
    print(table)
    print(f"(written to {out})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["execute", "bench", "run"])
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args()
    run_only = lambda paths: [run(p) for p in paths]  # noqa: E731 - what bench times
    {"execute": execute, "bench": bench, "run": run_only}[args.command](args.notebooks)


if __name__ == "__main__":
    main()
