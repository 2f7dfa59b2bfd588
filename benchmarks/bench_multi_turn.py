"""Multi-turn rollouts: harness overhead per tool call, gold-agent episodes per second, simulator concurrency.

python benchmarks/bench_multi_turn.py

Figures only, no thresholds. The concurrency part talks HTTP to a local OpenAI-compatible
server (tests/sim_server.py) that adds 200 ms per reply, like a remote simulator model.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.envs import get_domain, make_env
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import EpisodeResult, run_episodes
from rewardkit.loop.endpoint import EndpointSettings
from rewardkit.loop.gold import GoldAgent, hermes_call
from rewardkit.loop.user_sim.openai_sim import OpenAISimulator
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards import TaskCompletion

COMMAND = ".venv/bin/python benchmarks/bench_multi_turn.py"
N_CALLS = 5000
DELAY_S = 0.2  # simulator latency per reply
EPISODES = 64
SERIAL_SAMPLE = 8  # one-at-a-time episodes actually run; the rest is extrapolated
ORDER = "#W8268610"  # pending in the template
RETAIL = get_domain("retail")


def _ns(fn: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def _row(name: str, harness: list[int], raw: list[int]) -> str:
    h50, h99 = np.percentile(harness, [50, 99]) / 1e3
    r50, r99 = np.percentile(raw, [50, 99]) / 1e3
    return f"| {name} | {h50:.1f} | {h99:.1f} | {r50:.1f} | {r99:.1f} | {h50 - r50:.1f} | {h50 / r50:.2f}x |"


def harness_overhead() -> None:
    """env.call (validation, transaction, idempotency check, audit row) vs the tool function on the connection."""
    read = make_env("retail")
    spec = read.tools["get_order_details"]
    harness, raw = [], []
    for i in range(N_CALLS + 200):  # interleaved, so drift hits both alike; the first 200 warm up
        h = _ns(lambda: read.call("get_order_details", {"order_id": ORDER}))
        r = _ns(lambda: spec.fn(read.conn, order_id=ORDER))
        if i >= 200:
            harness.append(h)
            raw.append(r)
    assert read.call("get_order_details", {"order_id": ORDER}).ok
    rows = [_row("read: get_order_details", harness, raw)]

    # Writes: each pending order is cancelled once, in a fresh copy per round (one for the harness, one raw).
    pending = [r[0] for r in read.conn.execute("SELECT order_id FROM orders WHERE status = 'pending'")]
    cancel = read.tools["cancel_pending_order"]
    harness, raw = [], []
    while len(harness) < N_CALLS:
        with make_env("retail") as via_harness, make_env("retail") as direct:
            for oid in pending[: N_CALLS - len(harness)]:
                args = {"order_id": oid, "reason": "no longer needed"}
                harness.append(_ns(lambda a=args: via_harness.call("cancel_pending_order", a)))
                raw.append(_ns(lambda a=args: cancel.fn(direct.conn, **a)))
            assert via_harness.state_hash() == direct.state_hash()  # same writes, same state
    rows.append(_row("write: cancel_pending_order", harness, raw))
    read.conn.close()
    print(f"\n### Harness overhead per tool call ({N_CALLS:,} calls each, µs)\n")
    print("| call | env.call p50 | env.call p99 | spec.fn p50 | spec.fn p99 | overhead p50 | ratio p50 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


def gold_throughput() -> None:
    tasks = list(RETAIL.tasks().values())
    sim, limits = ScriptedSimulator(), RolloutLimits()
    run_episodes(RETAIL, tasks, GoldAgent, sim, limits, workers=8)  # warm-up: template, gold outcomes cached
    print(f"\n### Gold agent + scripted user, all {len(tasks)} retail tasks\n")
    print("| workers | wall s | episodes/s | agent turns/s |\n|---:|---:|---:|---:|")
    for workers in (1, 8):
        start = time.perf_counter()
        results = run_episodes(RETAIL, tasks, GoldAgent, sim, limits, workers=workers)
        wall = time.perf_counter() - start
        scores = TaskCompletion()(["x"] * len(tasks), messages=[r.messages for r in results], task=tasks,
                                  domain=["retail"] * len(tasks), rollout_infos=[r.infos for r in results])  # fmt: skip
        assert scores == [1.0] * len(tasks)  # the loop measured is a correct one
        turns = sum(r.infos["turns"] for r in results)
        print(f"| {workers} | {wall:.2f} | {len(tasks) / wall:.1f} | {turns / wall:.0f} |")


REPLIES = ("I'd like to check on my order.", "My email is sofia@example.com.", "Thanks, that's all. ###STOP###")


def scripted_reply(body: Mapping[str, Any]) -> str:
    """The n-th reply of the user, n = its own earlier messages (the simulator's are "assistant" there)."""
    return REPLIES[sum(m.get("role") == "assistant" for m in body["messages"])]


class TwoTexts:
    """Text, tool call, text: three simulator replies per episode (the opening and one per text turn)."""

    def __init__(self, task: Mapping[str, Any]) -> None:
        self.turns = iter(
            ["Could you give me your email?", hermes_call("get_order_details", {"order_id": ORDER}), "It is pending."]
        )

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> str:
        return next(self.turns)


class Sleeper:
    """The same replies from an in-process simulator that sleeps instead of calling HTTP."""

    name = "sleeper"

    def fingerprint(self) -> str:
        return "sleeper"

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Any], progress: Any) -> str:
        time.sleep(DELAY_S)
        return REPLIES[sum(turn.role == "user" for turn in dialogue)]


def _run(server: Any, tasks: list[dict[str, Any]], workers: int) -> tuple[float, list[EpisodeResult]]:
    settings = EndpointSettings(concurrency=workers, retries=0)
    sim = OpenAISimulator(server.base_url, "sim", guidelines=RETAIL.guidelines(), settings=settings)
    start = time.perf_counter()
    results = run_episodes(RETAIL, tasks, TwoTexts, sim, RolloutLimits(), workers=workers)
    wall = time.perf_counter() - start
    assert all(r.infos["termination"] == "user_stop" and r.infos["turns"] == 3 for r in results), results[0].infos
    return wall, results


def simulator_concurrency() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from sim_server import SimServer  # the tests' local OpenAI-compatible server

    tasks = list(RETAIL.tasks().values())[:EPISODES]
    with SimServer(delay_s=DELAY_S, reply=scripted_reply) as server:
        _run(server, tasks[:1], 1)  # warm-up: client, connections
        single = min(_run(server, tasks[:1], 1)[0] for _ in range(3))
        before = server.count
        together, _ = _run(server, tasks, EPISODES)
        calls, peak = server.count - before, server.max_in_flight
        together = min(together, _run(server, tasks, EPISODES)[0])  # best of 2: 64 threads on few cores are noisy
        serial, _ = _run(server, tasks[:SERIAL_SAMPLE], 1)
    start = time.perf_counter()
    run_episodes(RETAIL, tasks, TwoTexts, Sleeper(), RolloutLimits(), workers=EPISODES)
    no_http = time.perf_counter() - start
    serial_all = serial * EPISODES / SERIAL_SAMPLE
    print(f"\n### {EPISODES} episodes, OpenAISimulator on a local server adding {DELAY_S * 1e3:.0f} ms per reply\n")
    print(f"Each episode: 3 agent turns (text, tool call, text) and 3 simulator replies ({calls} requests in (a)).")
    scale = EPISODES // SERIAL_SAMPLE
    print("The server runs in this process: its request handling shares the GIL with the clients.")
    print(f"(b) ran {SERIAL_SAMPLE} episodes one at a time; its {EPISODES}-episode time is that x {scale}.\n")
    print("| run | wall s |\n|---|---:|")
    print(f"| ideal: one episode alone (3 x {DELAY_S * 1e3:.0f} ms of simulator + loop) | {single:.2f} |")
    print(f"| (a) all {EPISODES} at once: workers={EPISODES}, concurrency={EPISODES} (peak in flight {peak}) | "
          f"{together:.2f} |")  # fmt: skip
    print(
        f"| (b) one call at a time: workers=1, concurrency=1 (extrapolated from {SERIAL_SAMPLE}) | {serial_all:.2f} |"
    )
    print(f"| (a) without HTTP: an in-process simulator sleeping {DELAY_S * 1e3:.0f} ms per reply | {no_http:.2f} |")
    print(f"| speed-up (b) / (a) | {serial_all / together:.1f}x |")
    print(f"| (a) / ideal | {together / single:.2f}x |")


def scheduler_batch() -> None:
    """The training path: one batch's first user turns through the simulated_user scheduler's hook."""
    import json

    from swift.infer_engine.protocol import RolloutInferRequest
    from swift.rollout.agent_loop import invoke_async_hook

    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
    from rewardkit.plugins.scheduler import SimulatedUserScheduler

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from sim_server import SimServer

    rows = build_tau2_grpo(Tau2Options(domain="retail", split="train", multi_turn=True))[0][:EPISODES]

    def batch(n: int) -> list[Any]:
        return [
            RolloutInferRequest(messages=json.loads(json.dumps(r["messages"])), data_dict=r, uuid=f"r{i}")
            for i, r in enumerate(rows[:n])
        ]

    def time_openings(server: Any, n: int, concurrency: int) -> float:
        settings = EndpointSettings(concurrency=concurrency, retries=0)
        sim = OpenAISimulator(server.base_url, "sim", guidelines=RETAIL.guidelines(), settings=settings)
        scheduler = SimulatedUserScheduler(simulator=sim, limits=RolloutLimits(), concurrency=concurrency)
        requests = batch(n)
        start = time.perf_counter()
        invoke_async_hook(scheduler.on_trajectory_start(requests))
        return time.perf_counter() - start

    with SimServer(delay_s=DELAY_S, reply=scripted_reply) as server:
        time_openings(server, 1, 1)  # warm-up
        together = min(time_openings(server, EPISODES, EPISODES) for _ in range(2))
        serial = time_openings(server, 16, 1) * EPISODES / 16
    hook = "SimulatedUserScheduler.on_trajectory_start"
    print(f"\n### Training path: the first user turns of a {EPISODES}-rollout batch ({hook})\n")
    print("| run | wall s |\n|---|---:|")
    print(f"| one reply alone | {DELAY_S:.2f} + overhead |")
    print(f"| {EPISODES} at once (user_sim.concurrency = {EPISODES}) | {together:.2f} |")
    print(f"| one at a time (concurrency = 1; 16 timed, x {EPISODES // 16}) | {serial:.2f} |")
    print(f"| speed-up | {serial / together:.1f}x |")


def main() -> None:
    print(f"$ {COMMAND}")
    harness_overhead()
    gold_throughput()
    simulator_concurrency()
    scheduler_batch()


if __name__ == "__main__":
    main()
