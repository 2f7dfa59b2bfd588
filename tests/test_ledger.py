"""The simulator ledger: its counts reconcile with the episode log and with a server that counts its own requests."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest
from sim_server import SimServer

import rewardkit.loop.ledger
from rewardkit.cli import main
from rewardkit.loop.ledger import Ledger, ledger_lines
from rewardkit.runs.episodes.spec import RunSpec
from rewardkit.runs.episodes.synthesis import synthesize_run

REPLY = "I need help with my order please"  # 7 words: 7 completion tokens on a usage=True server


def test_the_docstring_example_holds() -> None:
    assert doctest.testmod(rewardkit.loop.ledger).failed == 0


def run(server: SimServer, tmp_path: Path, cache: Path | None = None, name: str = "a") -> tuple[dict, list[dict]]:
    spec = RunSpec(
        agent="gold",
        user=server.base_url,
        user_model="sim",
        user_retries=2,
        user_cache=cache,
        domain="retail",
        split="train",
        limit=3,
        workers=2,
        max_turns=4,
        price=(0.5, 2.0),
    )
    episodes = tmp_path / f"{name}.episodes.jsonl"
    report = synthesize_run(
        spec, tmp_path / f"{name}.jsonl", tmp_path / f"{name}.report.json", episodes, progress=False
    )
    return report, [json.loads(line) for line in episodes.read_text(encoding="utf-8").splitlines()]


def user_turns(records: list[dict]) -> int:
    """The simulator's replies in the log: every user message (the agent speaks first, the greeting)."""
    return sum(m["role"] == "user" for r in records for m in r.get("messages") or [])


def test_the_ledger_is_what_the_server_saw_and_the_log_holds(tmp_path: Path) -> None:
    with SimServer(usage=True, fail_first=1, status=500, reply=REPLY) as server:
        report, records = run(server, tmp_path)
        seen, failed = server.count, server.failed
    (user,) = [entry for entry in report["ledger"] if entry["role"] == "user"]  # the gold agent calls no model
    assert report["ledger"] == [user] and user["endpoint"] == server.base_url
    # Every request the server received, one of them the scheduled 500 that was retried.
    assert (
        (user["requests"], user["errors"], user["retries"], user["failures"]) == (seen, failed, 1, 0) == (seen, 1, 1, 0)
    )
    # Each reply that came back is one user turn of the log: three tasks, one reply each (the reply stops).
    assert user["requests"] - user["errors"] == user_turns(records) == 3
    # Tokens: the server's usage, a token per word; the 500 reported none.
    assert user["completion_tokens"] == 3 * len(REPLY.split())
    words = [sum(len(str(m.get("content") or "").split()) for m in body["messages"]) for body in server.requests]
    assert user["prompt_tokens"] == sum(words[1:])  # the first request got the 500
    # the cost is rounded to the millionth of a dollar: within half of one
    expected = (user["prompt_tokens"] * 0.5 + user["completion_tokens"] * 2.0) / 1e6
    assert user["cost_usd"] == pytest.approx(expected, abs=5e-7)
    assert user["latency_s"]["p50"] <= user["latency_s"]["p99"]


def test_replies_from_the_cache_are_hits_and_send_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "replies.sqlite"
    with SimServer(usage=True, reply=REPLY) as server:
        first, _ = run(server, tmp_path, cache, "first")
        before = server.count
        second, records = run(server, tmp_path, cache, "second")
        assert server.count == before == first["ledger"][0]["requests"] == 3  # the second run asked nothing
    (user,) = second["ledger"]
    assert (user["requests"], user["cache_hits"], user["prompt_tokens"]) == (0, user_turns(records), 0)
    assert user["cache_hits"] == 3 and user["latency_s"]["p50"] is None


def test_the_commands_print_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SimServer(usage=True, reply=REPLY) as server:
        out = tmp_path / "out"
        code = main(
            [
                "eval",
                "agent",
                "--agent",
                "gold",
                "--user",
                server.base_url,
                "--user-model",
                "sim",
                "--split",
                "train",
                "--limit",
                "2",
                "--trials",
                "1",
                "--max-turns",
                "2",
                "--out-dir",
                str(out),
                "--no-progress",
                "--price",
                "1",
                "3",
            ]
        )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (user,) = summary["ledger"]
    printed = capsys.readouterr().out
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]
    assert user["requests"] == user_turns(records) == server.count
    assert ledger_lines(summary["ledger"])[0] in printed and f"{user['requests']} requests (0 retried" in printed
    assert user["cost_usd"] == pytest.approx((user["prompt_tokens"] * 1 + user["completion_tokens"] * 3) / 1e6)


def test_a_failed_call_is_counted() -> None:
    ledger = Ledger("user")
    ledger.request(0.1, error=True)
    ledger.request(0.1, retry=True, error=True)
    ledger.failure()
    s = ledger.summary()
    assert (s["requests"], s["errors"], s["retries"], s["failures"], "cost_usd" in s) == (2, 2, 1, 1, False)
