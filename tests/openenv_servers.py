"""`rewardkit env serve --openenv` as a real subprocess, and the gold agent through a remote episode on it: for the
OpenEnv tests and the remote-environment benchmark (nothing is mocked)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sim_server import free_port, wait_listening

from rewardkit.loop.agents import as_reply
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.remote_env import RemoteEpisode

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def served(
    tmp: Path, domain: str = "retail", *flags: str, python: str = sys.executable
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`rewardkit env serve --openenv` on a free port, run by ``python`` (another stack's, from the benchmark); its
    base URL and process once it listens."""
    port = free_port()
    log = tmp / f"serve-{port}.log"
    cmd = [python, "-m", "rewardkit.cli", "env", "serve", "--openenv", "--domain", domain]
    with log.open("w") as err:
        proc = subprocess.Popen([*cmd, "--port", str(port), *flags], cwd=ROOT, stdout=err, stderr=err)
    try:
        wait_listening(proc, port, log, timeout_s=120)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # still closing its sessions after a large batch: not what is tested
            proc.kill()
            proc.wait(timeout=10)


def remote_play(url: str, task: Mapping[str, Any], max_turns: int = 30) -> RemoteEpisode:
    """The gold agent through a :class:`RemoteEpisode`, stepped as the ``simulated_user`` scheduler steps one."""
    agent, episode = GoldAgent(task), RemoteEpisode(url, task, RolloutLimits(max_turns=max_turns), "exclude")
    opening = episode.open()
    messages = [{"role": "user", "content": opening}] if opening is not None else []
    while not episode.done:
        reply = as_reply(agent(messages))
        messages.append({"role": "assistant", "content": reply.text})
        assert episode.agent_turn(reply.text, n_tokens=5) is False  # the server's user has answered already
        messages += episode.take_pending()
    episode.close()
    return episode
