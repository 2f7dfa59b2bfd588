"""The SQLite reply cache in front of a real (local) OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from sim_server import SimServer, free_port

from rewardkit.envs import get_domain
from rewardkit.envs.retail import DATA_DIR
from rewardkit.loop.endpoint import EndpointSettings
from rewardkit.loop.user_sim import GREETING, Progress, SimulatorError, Turn, UserSimConfig, make_simulator
from rewardkit.loop.user_sim.cache import CachedSimulator
from rewardkit.loop.user_sim.openai_sim import OpenAISimulator
from rewardkit.loop.user_sim.scripted import ScriptedSimulator

TASKS = json.loads((DATA_DIR / "tasks.json").read_text(encoding="utf-8"))
TASK = TASKS[0]
DIALOGUE = [Turn("agent", GREETING)]
RETAIL = get_domain("retail")
GUIDELINES = RETAIL.guidelines()


def sim(base_url: str, **settings: Any) -> OpenAISimulator:
    """The simulator in the chat form, whose last message is the agent's own text (the server echoes it)."""
    settings = EndpointSettings(**{"backoff_s": 0.01, "timeout_s": 5.0, **settings})
    return OpenAISimulator(base_url, "sim-model", guidelines=GUIDELINES, settings=settings, prompt="chat")


def test_identical_dialogue_is_served_from_the_cache(tmp_path: Path) -> None:
    with SimServer() as server:
        cached = CachedSimulator(sim(server.base_url), tmp_path / "c.db")
        assert cached.name == server.base_url
        first = cached.reply(TASK, DIALOGUE, Progress())
        assert cached.reply(TASK, DIALOGUE, Progress()) == first
        assert server.count == 1
        # Anything the reply depends on is part of the key.
        cached.reply(TASK, [*DIALOGUE, Turn("user", "hi"), Turn("agent", "done?")], Progress())
        cached.reply(TASK, DIALOGUE, Progress(state_done=True))
        cached.reply(TASKS[1], DIALOGUE, Progress())
        assert server.count == 4
        # Another simulator identity (here: model) never reads these replies.
        other = CachedSimulator(
            OpenAISimulator(server.base_url, "other-model", guidelines=GUIDELINES), tmp_path / "c.db"
        )
        other.reply(TASK, DIALOGUE, Progress())
        assert server.count == 5
    rows = sqlite3.connect(tmp_path / "c.db").execute("SELECT fingerprint, reply FROM replies").fetchall()
    assert len(rows) == 5 and "My email is a@b.c" in {reply for _, reply in rows}


def test_a_dialogue_holding_a_lone_surrogate_is_sent_and_cached(tmp_path: Path) -> None:
    """The agent's text may hold a lone surrogate (a model's "\\ud800"): it is part of the key like any text, and goes
    to the simulator escaped, as UTF-8 (the server reads it strictly, as vLLM does)."""
    said = f"Your order {chr(0xD800)} is on its way."
    dialogue = [*DIALOGUE, Turn("user", "hi"), Turn("agent", said)]
    with SimServer() as server:
        cached = CachedSimulator(sim(server.base_url), tmp_path / "c.db")
        first = cached.reply(TASK, dialogue, Progress())
        assert cached.reply(TASK, dialogue, Progress()) == first
        assert server.count == 1 and server.requests[0]["messages"][-1]["content"] == said


def test_replay_is_offline(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SimServer() as server:
        url = server.base_url
        first = CachedSimulator(sim(url), path).reply(TASK, DIALOGUE, Progress())
    # The server is gone: a hit still answers, a miss says what to do.
    replay = CachedSimulator(sim(url), path, "replay")
    assert replay.reply(TASK, DIALOGUE, Progress()) == first
    with pytest.raises(SimulatorError, match="no cached reply for this dialogue; run once with cache_mode read_write"):
        replay.reply(TASK, [*DIALOGUE, Turn("user", "x"), Turn("agent", "y")], Progress())
    with pytest.raises(FileNotFoundError, match="read_write"):
        CachedSimulator(sim(url), tmp_path / "missing.db", "replay")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)")
    with pytest.raises(SimulatorError, match="cannot read the cache: no such table"):
        CachedSimulator(sim(url), other, "replay").reply(TASK, DIALOGUE, Progress())


def test_failed_call_is_not_cached(tmp_path: Path) -> None:
    with SimServer(fail_first=2, status=503) as server:
        cached = CachedSimulator(sim(server.base_url, retries=1), tmp_path / "c.db")
        with pytest.raises(SimulatorError, match="HTTP 503"):
            cached.reply(TASK, DIALOGUE, Progress())
        assert cached.reply(TASK, DIALOGUE, Progress()) == "My email is a@b.c"  # a fresh call, not an error
        assert server.count == 3


def test_down_endpoint_error_propagates(tmp_path: Path) -> None:
    cached = CachedSimulator(sim(f"http://127.0.0.1:{free_port()}/v1", retries=0), tmp_path / "c.db")
    with pytest.raises(SimulatorError, match="connection failed"):
        cached.reply(TASK, DIALOGUE, Progress())
    assert sqlite3.connect(tmp_path / "c.db").execute("SELECT COUNT(*) FROM replies").fetchone() == (0,)


def test_concurrent_writers(tmp_path: Path) -> None:
    """8 threads on two cache objects over one file (as two ranks would), half the dialogues shared."""
    path = tmp_path / "c.db"
    with SimServer(delay_s=0.02, reply=lambda body: body["messages"][-1]["content"].upper()) as server:
        caches = [CachedSimulator(sim(server.base_url), path) for _ in range(2)]
        errors: list[BaseException] = []

        def worker(i: int) -> None:
            try:
                for j in range(10):
                    text = f"hello {j if i % 2 else f'{i}-{j}'}"
                    assert caches[i % 2].reply(TASK, [Turn("agent", text)], Progress()) == text.upper()
            except BaseException as exc:  # re-raised in the main thread below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    keys = sqlite3.connect(path).execute("SELECT COUNT(*) FROM replies").fetchone()[0]
    assert keys == 4 * 10 + 10  # 4 private sets of 10, one shared set of 10
    assert server.count >= keys


def test_make_simulator_wraps_in_cache(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    scripted = make_simulator(UserSimConfig(cache=str(path)), RETAIL)
    assert isinstance(scripted, CachedSimulator) and isinstance(scripted.inner, ScriptedSimulator)
    text = scripted.reply(TASK, DIALOGUE, Progress())
    replay = make_simulator(UserSimConfig(cache=str(path), cache_mode="replay"), RETAIL)
    assert replay.reply(TASK, DIALOGUE, Progress()) == text
    assert isinstance(make_simulator(UserSimConfig(cache=str(path), cache_mode="off"), RETAIL), ScriptedSimulator)
