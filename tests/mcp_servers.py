"""`rewardkit env serve --mcp` as a real subprocess, for the MCP tests (nothing is mocked)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sim_server import wait_listening

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
        wait_listening(proc, port, log)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def http_server(port: int, log: Path, domain: str = "retail") -> Iterator[str]:
    """The same, yielding only the URL."""
    with http_process(port, log, domain) as (url, _):
        yield url


def faulty(trigger: str, nth: int, counter: Path | None, fault: str = "dies") -> str:
    """A stdio command line: rewardkit's MCP server behind a relay that fails at the ``nth`` request matching
    ``trigger`` (``"tools/call:<tool>"``, ``"resources/read:<uri>"``), counted across every process of the command in
    ``counter`` (each episode opens its own session, and each gold replay one more), or with ``counter`` None within
    each process (every session fails there). ``fault``: ``dies`` (the server is killed, the relay exits) or
    ``forgets`` (that request and every later one of the session answer the SDK's "Session not found", as a restarted
    server answers a session it never opened)."""
    return shlex.join([sys.executable, str(Path(__file__)), trigger, str(nth), str(counter or "-"), fault])


def _matches(request: Any, trigger: str) -> bool:
    method, _, target = trigger.partition(":")
    params = request.get("params") if isinstance(request, dict) else None
    named = params.get("name", params.get("uri")) if isinstance(params, dict) else None
    return named == target and request.get("method") == method


def _relay(trigger: str, nth: int, counter: Path | None, fault: str) -> None:
    """Pass stdin to the server and its answers back, until the ``nth`` matching request; then fail as ``fault``."""
    server = subprocess.Popen(SERVE, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    out, answers, lock = sys.stdout.buffer, server.stdout, threading.Lock()

    def send(line: bytes) -> None:
        with lock:
            out.write(line)
            out.flush()

    threading.Thread(target=lambda: [send(line) for line in answers], daemon=True).start()
    forgotten, matched = False, 0
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if not forgotten and _matches(request, trigger):
            matched += 1
            if counter is not None:
                with counter.open("a") as seen:
                    seen.write(".")
                matched = len(counter.read_text())
            forgotten = matched == nth
            if forgotten and fault == "dies":
                server.kill()
                os._exit(1)
        if forgotten and "id" in request:
            error = {"code": -32600, "message": "Session not found"}  # the SDK server's answer to an unknown session
            send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}).encode() + b"\n")
            continue
        server.stdin.write(line)
        server.stdin.flush()
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    _relay(sys.argv[1], int(sys.argv[2]), None if sys.argv[3] == "-" else Path(sys.argv[3]), sys.argv[4])
