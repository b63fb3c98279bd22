"""What benchmark reports say about the machine they ran on."""

from __future__ import annotations

from pathlib import Path


def cpu_model() -> str | None:
    """This machine's CPU model name (Linux ``/proc/cpuinfo``), or None where it cannot be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None
