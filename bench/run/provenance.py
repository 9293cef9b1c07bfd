"""What produced a result: the suite's version, its libraries', the git commit and the CPU kernels, recorded in
every summary.json so a table can say which code and which machine made it (the same seed and tree trained to
other scores on two days of this project's machine: 84 and 90 iterations for one cifar10 probe; float rounding
follows the instruction set torch's kernels were built for, so a report that mixes them says so)."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

from bench import __version__


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def versions() -> dict[str, str]:
    import torch  # here, not at the top: status and report need no torch
    import torchvision

    return {
        "adascale_bench": __version__,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "python": sys.version.split()[0],
        "cpu": f"{platform.machine()} {torch.backends.cpu.get_cpu_capability()}",  # e.g. x86_64 AVX512
    }
