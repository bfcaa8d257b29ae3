"""Arms of the fake training script (a unique module name: tests/ has no packages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.runners import Arm

FAKE_TRAIN = Path(__file__).parent.parent / "experiments" / "fake_train.py"


def fake_arm(raw: Path, name: str, *args: str, timeout: float = 60.0, **kw) -> Arm:
    return Arm(name, [sys.executable, str(FAKE_TRAIN), "--steps", "4", *args], raw / f"{name}.log",
               timeout=timeout, **kw)


def pair(raw: Path, round_no: int = 1, step_ms: str = "10") -> list[Arm]:
    """One interleaved round: the baseline arm, then the variant."""
    return [fake_arm(raw, f"baseline-{round_no}", "--step-ms", "20"),
            fake_arm(raw, f"run-{round_no}", "--step-ms", step_ms)]


def calls(state: Path) -> list[str]:
    """What the stub executables were asked, one command line each."""
    f = state / "calls.txt"
    return f.read_text().splitlines() if f.exists() else []


NAMESPACES = (["unshare", "-n", "-p", "-f", "--mount-proc"], ["unshare", "-r", "-n", "-p", "-f", "--mount-proc"])


def in_private_namespace(cmd: list[str], setup: str = "ip link set lo up") -> list[str]:
    """``cmd`` run in a new network namespace (loopback only) and PID namespace: servers that bind all
    interfaces stay unreachable, and every process left behind dies with the namespace. Skips if none can be made."""
    probe = None
    for ns in NAMESPACES:
        probe = subprocess.run([*ns, "sh", "-c", setup], capture_output=True, text=True, check=False)
        if probe.returncode == 0:
            return [*ns, "sh", "-c", f'{setup} && exec "$0" "$@"', *cmd]
    pytest.skip(f"cannot make a private network namespace here ({probe.stderr.strip()}): "
                "servers that bind all interfaces are not started outside one")
