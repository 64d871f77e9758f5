"""The CPUs that `make test-cpus` simulates on this machine, one line of settings each.

PyTorch picks its vector kernels at start-up (``torch.backends.cpu.get_cpu_capability()``:
``DEFAULT``, ``AVX2``, ``AVX512`` on x86), and so do the libraries it calls for matrix products,
MKL and oneDNN, each by its own rules. A machine can run the narrower kernels of an older CPU,
so a fast machine can stand in for a slower one: this prints, for each capability the machine
supports other than the one PyTorch chose, the environment that makes all three use it::

    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2

(``ATEN_CPU_CAPABILITY`` alone changes PyTorch's own kernels but not its matrix products.)
It prints nothing where there is nothing narrower to try (an ARM Mac, for instance).
"""

from __future__ import annotations

import os
import subprocess
import sys

# capability -> the settings that select it in PyTorch, MKL and oneDNN, narrowest first
CAPABILITIES = {
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512",
               "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
}
PROBE = "import torch; print(torch.backends.cpu.get_cpu_capability())"


def capability(env: dict[str, str] | None = None) -> str:
    """The capability PyTorch chooses in a new process with these extra settings."""
    # a capability the CPU lacks falls back to the CPU's own: the probe tells which one ran
    clean = {k: v for k, v in os.environ.items() if k not in CAPABILITIES["default"]}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **(env or {})},
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().lower()


def others() -> list[str]:
    """Settings lines for every capability this CPU runs other than PyTorch's own choice."""
    native = capability()
    lines = []
    for name, env in CAPABILITIES.items():
        if name != native and capability(env) == name:
            lines.append(" ".join(f"{k}={v}" for k, v in env.items()))
    return lines


if __name__ == "__main__":
    print("\n".join(others()))
