"""``swift deploy`` of a local model on CPU for end-to-end tests: started in its own process group, stopped whole.

``swift deploy`` runs the real server in a child process, so terminating the launcher alone leaves the server
running; a server wedged by an over-long prompt also ignores SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from sim_server import free_port
from test_e2e_grpo import ROOT, SWIFT

from rewardkit.pipelines.tiny_model import offline_env


def wait_until_serving(base_url: str, proc: subprocess.Popen, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"swift deploy exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"swift deploy did not serve {base_url} within {timeout_s}s")


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group, SIGKILL to whatever is left after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        proc.poll()  # reap the launcher, else its zombie keeps the group alive
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@contextlib.contextmanager
def swift_deploy(model: Path, log_path: Path, name: str) -> Iterator[str]:
    """Serve ``model`` as ``name`` on a free local port; yields the base URL (``…/v1``)."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [
                SWIFT,
                "deploy",
                "--model",
                str(model),
                "--infer_backend",
                "transformers",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--served_model_name",
                name,
                "--verbose",
                "false",
            ],
            cwd=ROOT,
            env={**os.environ, **offline_env()},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_until_serving(base_url, server)
            yield base_url
        finally:
            stop_group(server)
