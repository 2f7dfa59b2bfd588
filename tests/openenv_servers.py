"""`rewardkit env serve --openenv` as a real subprocess, for the OpenEnv tests (nothing is mocked)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from sim_server import free_port, wait_listening

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def served(tmp: Path, domain: str = "retail", *flags: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`rewardkit env serve --openenv` on a free port; its base URL and process once it listens."""
    port = free_port()
    log = tmp / f"serve-{port}.log"
    cmd = [sys.executable, "-m", "rewardkit.cli", "env", "serve", "--openenv", "--domain", domain]
    with log.open("w") as err:
        proc = subprocess.Popen([*cmd, "--port", str(port), *flags], cwd=ROOT, stdout=err, stderr=err)
    try:
        wait_listening(proc, port, log, timeout_s=120)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)
