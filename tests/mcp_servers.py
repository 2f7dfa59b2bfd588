"""`rewardkit env serve --mcp` as a real subprocess, for the MCP tests (nothing is mocked)."""

from __future__ import annotations

import contextlib
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVE = [sys.executable, "-m", "rewardkit.cli", "env", "serve", "--domain", "retail", "--mcp"]
STDIO = shlex.join(SERVE)


@contextlib.contextmanager
def http_process(port: int, log: Path, domain: str = "retail") -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`rewardkit env serve --mcp --transport http` on ``port``; yields its URL and process once it listens."""
    with log.open("w") as err:
        cmd = [*SERVE, "--transport", "http", "--port", str(port)]
        cmd[cmd.index("retail")] = domain
        proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"the server exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"the server did not listen: {log.read_text()}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def http_server(port: int, log: Path, domain: str = "retail") -> Iterator[str]:
    """The same, yielding only the URL."""
    with http_process(port, log, domain) as (url, _):
        yield url
