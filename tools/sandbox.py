"""Start a process confined to one working directory (the grader starts its kernels this
way).

    python tools/sandbox.py --work DIR [--read DIR ...] -- PROGRAM ARGS...

Before it replaces itself with PROGRAM (an IPython kernel), it:

* gives the process a clean environment whose HOME, TMPDIR and Jupyter, IPython and
  Matplotlib folders all lie in DIR;
* moves it into a new network namespace when the system allows it (no network at all;
  the kernel talks to the grader over Unix sockets in DIR);
* with Linux Landlock (5.13 and later), lets it and its children write only below DIR,
  read only below DIR and the ``--read`` folders (Python, its packages, the system's
  libraries), not connect to or listen on any TCP port, and not signal processes outside
  the sandbox.

The resource limits (CPU time, memory, file size) are set by the grader in its child
process and inherited. Each measure that the system does not support is reported on
stderr and skipped; ``--require-landlock`` makes a missing Landlock an error instead.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import sys
from pathlib import Path

# Landlock ABI constants (linux/landlock.h).
_SYS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 1 << 1, 1 << 2, 1 << 3
FS_REMOVE_DIR, FS_REMOVE_FILE, FS_MAKE_CHAR, FS_MAKE_DIR = (
    1 << 4,
    1 << 5,
    1 << 6,
    1 << 7,
)
FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK, FS_MAKE_SYM = (
    1 << 8,
    1 << 9,
    1 << 10,
    1 << 11,
    1 << 12,
)
FS_REFER, FS_TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 1 << 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000

READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 without Landlock."""
    numbers = _SYS.get(platform.machine())
    if sys.platform != "linux" or numbers is None:
        return 0
    version = _libc().syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def landlock(work: Path, read_dirs: list[Path]) -> str:
    """Restrict this process and its future children; returns what was applied."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available")
    create, add_rule, restrict = _SYS[platform.machine()]
    libc = _libc()
    fs = (
        READ
        | FS_WRITE_FILE
        | FS_REMOVE_DIR
        | FS_REMOVE_FILE
        | FS_MAKE_CHAR
        | FS_MAKE_DIR
        | FS_MAKE_REG
        | FS_MAKE_SOCK
        | FS_MAKE_FIFO
        | FS_MAKE_BLOCK
        | FS_MAKE_SYM
    )
    if abi >= 2:
        fs |= FS_REFER
    if abi >= 3:
        fs |= FS_TRUNCATE
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(fs, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(
        create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    file_rights = (
        FS_EXECUTE | FS_READ_FILE | FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    )

    def allow(path: Path, rights: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # a folder this system lacks
        try:
            if not path.is_dir():
                rights &= file_rights
            rule = _PathBeneath(rights, fd)
            if libc.syscall(
                add_rule,
                ruleset,
                RULE_PATH_BENEATH,
                ctypes.byref(rule),
                ctypes.c_uint32(0),
            ):
                raise OSError(
                    ctypes.get_errno(), f"landlock_add_rule failed for {path}"
                )
        finally:
            os.close(fd)

    for folder in read_dirs:
        allow(folder, READ)
    allow(Path("/dev/null"), FS_READ_FILE | FS_WRITE_FILE)
    allow(work, fs)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.syscall(restrict, ruleset, ctypes.c_uint32(0)):
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)
    return (
        f"landlock ABI {abi}: write only in the working folder"
        + (", no TCP" if net else "")
        + (", no signals out" if scoped else "")
    )


def no_network() -> str:
    """Move into a new, empty network namespace (as root, or in a new user
    namespace)."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNET) == 0:
        return "network namespace: no network"
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        try:  # keep our ids inside the user namespace
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        except OSError:
            pass
        return "user and network namespace: no network"
    raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")


def clean_environment(work: Path) -> dict[str, str]:
    keep = (
        "PATH",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "TORCH_NUM_THREADS",
        "JPY_PARENT_PID",
        "JPY_INTERRUPT_EVENT",
    )
    env = {k: os.environ[k] for k in keep if k in os.environ}
    for name, sub in (
        ("HOME", ""),
        ("TMPDIR", "tmp"),
        ("IPYTHONDIR", ".ipython"),
        ("MPLCONFIGDIR", ".mpl"),
        ("JUPYTER_CONFIG_DIR", ".jupyter"),
        ("JUPYTER_DATA_DIR", ".jupyter/data"),
        ("JUPYTER_RUNTIME_DIR", ".jupyter/runtime"),
    ):
        folder = work / sub
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    env.update(MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
    return env


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--read", type=Path, action="append", default=[])
    parser.add_argument("--require-landlock", action="store_true")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    work = args.work.resolve()
    env = clean_environment(work)
    os.chdir(work)
    report = []
    try:
        report.append(no_network())
    except OSError as err:
        report.append(f"network not isolated ({err})")
    try:
        report.append(landlock(work, [p.resolve() for p in args.read]))
    except OSError as err:
        if args.require_landlock:
            sys.exit(f"sandbox: {err}")
        report.append(f"files not confined ({err})")
    (work / ".sandbox").write_text("\n".join(report) + "\n", encoding="utf-8")
    os.execve(program[0], program, env)


if __name__ == "__main__":
    main()
