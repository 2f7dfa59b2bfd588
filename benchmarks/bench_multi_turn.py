"""Multi-turn rollouts: harness overhead per tool call, gold-agent episodes per second, rollouts at training scale.

    python benchmarks/bench_multi_turn.py                  # 256 episodes at once; a few minutes
    python benchmarks/bench_multi_turn.py --quick          # 16 episodes, 50 ms replies: for CI, no figure to read
    python benchmarks/bench_multi_turn.py --http-compare   # only the HTTP client against aiohttp (the last part)

Figures only, no thresholds. The rollout parts talk HTTP to a local OpenAI-compatible server
(tests/sim_server.py) that adds 200 ms per reply, like a remote simulator model, and runs in a process of its
own, as a simulator model does. At MUA-RL's scale a GRPO step is 256 rollouts (32 prompts x 8): both the
episode loop of ``synth``/``eval`` and the ``simulated_user`` scheduler under ms-swift's own multi-turn driver
run 256 episodes at once, against one episode alone. The server keeps its connections (HTTP/1.1), as vLLM does.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import inspect
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp  # ms-swift's own dependency: the library the transport is measured against
import numpy as np
from _timing import QUICK_HELP

from rewardkit.envs import get_domain, make_env
from rewardkit.envs.task_verdict import task_verdict
from rewardkit.files.jsonl import dumps
from rewardkit.loop import http11, transport
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import EpisodeResult, run_episodes
from rewardkit.loop.endpoint import EndpointSettings
from rewardkit.loop.gold import GoldAgent, hermes_call
from rewardkit.loop.transport import TransportError
from rewardkit.loop.user_sim.openai_sim import OpenAISimulator
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards import TaskCompletion

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from sim_process import SimServerProcess  # the tests' local OpenAI-compatible server, in its own process

COMMAND = "python benchmarks/bench_multi_turn.py"
ORDER = "#W8268610"  # pending in the template
RETAIL = get_domain("retail")
SERIAL_SAMPLE = 8  # one-at-a-time episodes actually run; the rest is extrapolated
BEST_OF = 4  # batches timed per figure, the fastest counts: 256 threads on two shared cores are noisy
COMPARE_ROUNDS = 5  # batches per HTTP client, taken in turn


def _ns(fn: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def _row(name: str, harness: list[int], raw: list[int]) -> str:
    h50, h99 = np.percentile(harness, [50, 99]) / 1e3
    r50, r99 = np.percentile(raw, [50, 99]) / 1e3
    return f"| {name} | {h50:.1f} | {h99:.1f} | {r50:.1f} | {r99:.1f} | {h50 - r50:.1f} | {h50 / r50:.2f}x |"


def harness_overhead(n_calls: int) -> None:
    """env.call (validation, transaction, idempotency check, audit row) vs the tool function on the connection."""
    read = make_env("retail")
    spec = read.tools["get_order_details"]
    harness, raw = [], []
    for i in range(n_calls + 200):  # interleaved, so drift hits both alike; the first 200 warm up
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
    while len(harness) < n_calls:
        with make_env("retail") as via_harness, make_env("retail") as direct:
            for oid in pending[: n_calls - len(harness)]:
                args = {"order_id": oid, "reason": "no longer needed"}
                harness.append(_ns(lambda a=args: via_harness.call("cancel_pending_order", a)))
                raw.append(_ns(lambda a=args: cancel.fn(direct.conn, **a)))
            assert via_harness.state_hash() == direct.state_hash()  # same writes, same state
    rows.append(_row("write: cancel_pending_order", harness, raw))
    read.conn.close()
    print(f"\n### Harness overhead per tool call ({n_calls:,} calls each, µs)\n")
    print("| call | env.call p50 | env.call p99 | spec.fn p50 | spec.fn p99 | overhead p50 | ratio p50 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


def gold_throughput(limit: int | None) -> None:
    """All tasks whose gold succeeds (a task whose gold write fails on purpose is no measure of the loop)."""
    tasks = [t for t in RETAIL.tasks().values() if task_verdict("retail", t).playable][:limit]
    sim, limits = ScriptedSimulator(), RolloutLimits()
    run_episodes(RETAIL, tasks, GoldAgent, sim, limits, workers=8)  # warm-up: template, gold outcomes cached
    print(f"\n### Gold agent + scripted user, {len(tasks)} retail tasks (those whose gold succeeds)\n")
    print("| workers | wall s | episodes/s | agent turns/s |\n|---:|---:|---:|---:|")
    for workers in (1, 8):
        start = time.perf_counter()
        results = run_episodes(RETAIL, tasks, GoldAgent, sim, limits, workers=workers)
        wall = time.perf_counter() - start
        scores = TaskCompletion()(
            ["x"] * len(tasks),
            messages=[r.messages for r in results],
            task=tasks,
            domain=["retail"] * len(tasks),
            rollout_infos=[r.infos for r in results],
        )
        assert scores == [1.0] * len(tasks)  # the loop measured is a correct one
        turns = sum(r.infos.turns for r in results)
        print(f"| {workers} | {wall:.2f} | {len(tasks) / wall:.1f} | {turns / wall:.0f} |")


REPLIES = ("I'd like to check on my order.", "My email is sofia@example.com.", "Thanks, that's all. ###STOP###")


def scripted_reply(body: Mapping[str, Any]) -> str:
    """The n-th reply of the user, n = its own earlier messages (the simulator's are "assistant" there)."""
    return REPLIES[sum(m.get("role") == "assistant" for m in body["messages"])]


AGENT_TURNS = ("Could you give me your email?", hermes_call("get_order_details", {"order_id": ORDER}), "It is pending.")


class TwoTexts:
    """Text, tool call, text: three simulator replies per episode (the opening and one per text turn)."""

    def __init__(self, task: Mapping[str, Any]) -> None:
        self.turns = iter(AGENT_TURNS)

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> str:
        return next(self.turns)


class Sleeper:
    """The same replies from an in-process simulator that sleeps instead of calling HTTP."""

    name = "sleeper"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def fingerprint(self) -> str:
        return "sleeper"

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Any], progress: Any) -> str:
        time.sleep(self.delay_s)
        return REPLIES[sum(turn.role == "user" for turn in dialogue)]


def _simulator(server: Any, concurrency: int) -> OpenAISimulator:
    settings = EndpointSettings(concurrency=concurrency, retries=0)
    # the chat form: the server reads its replies off the role-flipped messages
    return OpenAISimulator(server.base_url, "sim", guidelines=RETAIL.guidelines(), settings=settings, prompt="chat")


def _loop(server: Any, tasks: list[dict[str, Any]], workers: int) -> tuple[float, list[EpisodeResult]]:
    sim = _simulator(server, workers)
    start = time.perf_counter()
    results = run_episodes(RETAIL, tasks, TwoTexts, sim, RolloutLimits(), workers=workers)
    wall = time.perf_counter() - start
    assert all(r.infos.termination == "user_stop" and r.infos.turns == 3 for r in results), results[0].infos
    return wall, results


def _tasks(n: int) -> list[dict[str, Any]]:
    every = list(RETAIL.tasks().values())
    return [every[i % len(every)] for i in range(n)]


def episode_loop(server: Any, episodes: int, delay_s: float) -> None:
    """``run_episodes``, the loop of synth and eval: every episode in its own thread."""
    tasks = _tasks(episodes)
    _loop(server, tasks[:1], 1)  # warm-up: client, connections
    single = min(_loop(server, tasks[:1], 1)[0] for _ in range(3))
    before = server.stats()["count"]
    together = _loop(server, tasks, episodes)[0]
    calls = server.stats()["count"] - before
    together = min(together, *(_loop(server, tasks, episodes)[0] for _ in range(BEST_OF - 1)))
    serial = _loop(server, tasks[:SERIAL_SAMPLE], 1)[0] * episodes / SERIAL_SAMPLE
    start = time.perf_counter()
    run_episodes(RETAIL, tasks, TwoTexts, Sleeper(delay_s), RolloutLimits(), workers=episodes)
    no_http = time.perf_counter() - start
    ms = f"{delay_s * 1e3:.0f} ms"
    print(f"\n### The episode loop: {episodes} episodes, OpenAISimulator on a server process adding {ms} per reply\n")
    print(f"Each episode: 3 agent turns (text, tool call, text) and 3 simulator replies ({calls} requests at once).")
    print(
        f"All at once: the fastest of {BEST_OF} batches. One at a time: {SERIAL_SAMPLE} episodes run, scaled to "
        f"{episodes}.\n"
    )
    print("| run | wall s | / one episode |\n|---|---:|---:|")
    print(f"| one episode alone (3 x {ms} of simulator + loop) | {single:.2f} | 1.00x |")
    print(f"| all {episodes} at once (workers = {episodes}) | {together:.2f} | {together / single:.2f}x |")
    print(f"| one at a time, scaled | {serial:.2f} | {serial / single:.1f}x |")
    print(f"| all at once, an in-process simulator sleeping {ms} (no HTTP) | {no_http:.2f} | {no_http / single:.2f}x |")


def cold_start(episodes: int, delay_s: float) -> None:
    """The first batch of a process (a run's first GRPO step): no template, no gold outcome cached yet. Runs first,
    before anything else here builds them."""
    tasks = _tasks(episodes)
    start = time.perf_counter()
    run_episodes(RETAIL, tasks, TwoTexts, Sleeper(delay_s), RolloutLimits(), workers=episodes)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    run_episodes(RETAIL, tasks, TwoTexts, Sleeper(delay_s), RolloutLimits(), workers=episodes)
    warm = time.perf_counter() - start
    print(
        f"\n### The first batch of a process: {episodes} episodes at once, an in-process simulator sleeping "
        f"{delay_s * 1e3:.0f} ms\n"
    )
    print(
        f"| run | wall s |\n|---|---:|\n| cold: the database template and {len(set(map(id, tasks)))} tasks' gold "
        f"outcomes built on the way | {cold:.2f} |\n| warm: the same batch again | {warm:.2f} |"
    )


def training_batches(server: Any) -> Callable[[int], tuple[float, float]]:
    """``rollouts(n)``: one batch of ``n`` whole episodes through the ``simulated_user`` scheduler under ms-swift's own
    multi-turn driver (``run_multi_turn``, as the GRPO trainer runs it in colocate mode), every turn, not just the
    first; its wall seconds and this process's CPU seconds (as :func:`_timed`)."""
    import json

    from swift.infer_engine.protocol import (
        ChatCompletionResponse,
        ChatCompletionResponseChoice,
        ChatMessage,
        RequestConfig,
        RolloutInferRequest,
        RolloutOutput,
        UsageInfo,
    )
    from swift.rollout.agent_loop import invoke_async_hook, run_multi_turn

    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
    from rewardkit.plugins.scheduler import SimulatedUserScheduler

    rows = build_tau2_grpo(Tau2Options(domain="retail", split="train", multi_turn=True))[0]

    schedulers: dict[int, Any] = {}  # one per batch size, kept from batch to batch as a training run keeps it

    def rollouts(n: int) -> tuple[float, float]:
        if n not in schedulers:
            # The scripted replies give every task the same e-mail, which the user review flags: it counts them
            # (its rules still run on every episode) rather than leaving the episodes out.
            schedulers[n] = SimulatedUserScheduler(
                simulator=_simulator(server, n), limits=RolloutLimits(user_review="count"), concurrency=n
            )
        scheduler = schedulers[n]
        requests = [
            RolloutInferRequest(
                messages=json.loads(json.dumps(rows[i % len(rows)]["messages"])),
                data_dict=rows[i % len(rows)],
                uuid=f"r{i}",
            )
            for i in range(n)
        ]
        turns = {r.uuid: iter(AGENT_TURNS) for r in requests}

        def policy(batch: list[Any], config: Any) -> list[Any]:  # the engine's place: the scripted agent's turns
            return [
                RolloutOutput(
                    response=ChatCompletionResponse(
                        model="scripted",
                        usage=UsageInfo(0, 0, 0),
                        choices=[
                            ChatCompletionResponseChoice(
                                0, ChatMessage("assistant", next(turns[r.uuid])), "stop", token_ids=[1]
                            )
                        ],
                    )
                )
                for r in batch
            ]

        start, cpu = time.perf_counter(), time.process_time()
        invoke_async_hook(scheduler.on_trajectory_start(requests))
        outputs = run_multi_turn(requests, policy(requests, None), scheduler, policy, RequestConfig(), max_turns=8)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        endings = {o.rollout_infos["termination"] for o in outputs}
        assert endings == {"user_stop"} and {o.rollout_infos["num_turns"] for o in outputs} == {3}, endings
        return wall, cpu

    return rollouts


def scheduler_rollouts(server: Any, episodes: int) -> None:
    """The training path: whole episodes through the ``simulated_user`` scheduler, one alone and many at once."""
    rollouts = training_batches(server)
    rollouts(1)  # warm-up
    single = min(rollouts(1)[0] for _ in range(3))
    together = min(rollouts(episodes)[0] for _ in range(BEST_OF))
    print(f"\n### Training path: {episodes} whole rollouts through SimulatedUserScheduler under run_multi_turn\n")
    print(
        "Each rollout: the opening, then 3 agent turns and 2 more simulator replies, as in the episode loop. "
        f"One scheduler runs every batch, as in training; the fastest of {BEST_OF} batches counts.\n"
    )
    print("| run | wall s | / one rollout |\n|---|---:|---:|")
    print(f"| one rollout alone | {single:.2f} | 1.00x |")
    print(f"| {episodes} at once (user_sim.concurrency = {episodes}) | {together:.2f} | {together / single:.2f}x |")


class AiohttpPost:
    """``transport.post`` on aiohttp and its C parser: the same request (JSON body, headers, per-read timeout), the
    same errors (:class:`TransportError`, ``timeout`` set when time ran out). ms-swift runs each scheduler hook under a
    fresh event loop, and the simulator is called from the scheduler's thread pool, so the session lives on an event
    loop of its own, in a thread, for as long as the client: the pool's threads hand it their requests and wait, and
    its connections are kept from hook to hook. Proxies from the environment (``trust_env``), as the transport."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="aiohttp", daemon=True)
        self.thread.start()
        self.session = self._wait(self._session())

    async def _session(self) -> aiohttp.ClientSession:
        # no cap on connections: the endpoint's semaphore bounds the requests in flight, as with the transport's pool
        connector = aiohttp.TCPConnector(limit=0)
        return aiohttp.ClientSession(connector=connector, trust_env=True, auto_decompress=False)

    def _wait(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _post(self, url: str, data: bytes, headers: dict[str, str], timeout_s: float) -> tuple[int, bytes]:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
        async with self.session.post(url, data=data, headers=headers, timeout=timeout) as reply:
            return reply.status, await reply.read()

    def __call__(
        self, url: str, body: Mapping[str, Any], headers: Mapping[str, str], timeout_s: float
    ) -> tuple[int, bytes]:
        data = dumps(body).encode("utf-8")
        sent = {"Content-Type": "application/json", "Accept-Encoding": "identity", **headers}
        try:
            return self._wait(self._post(url, data, sent, timeout_s))
        except TimeoutError as exc:  # aiohttp's read and connect timeouts are TimeoutErrors
            raise TransportError(f"timed out after {timeout_s:g} s: {exc}", timeout=True) from exc
        except (OSError, aiohttp.ClientError) as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self._wait(self.session.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@contextlib.contextmanager
def _posting(post: Callable[..., tuple[int, bytes]]) -> Iterator[None]:
    """Every endpoint's chat requests through ``post`` (the endpoint calls ``transport.post``)."""
    own = transport.post
    transport.post = post
    try:
        yield
    finally:
        transport.post = own


def _lines(source: str) -> int:
    """Lines of code: neither blank, nor a comment, nor a docstring's."""
    scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docs = {
        i
        for node in ast.walk(ast.parse(source))
        if isinstance(node, scopes) and ast.get_docstring(node, clean=False) is not None
        for i in range(node.body[0].lineno, (node.body[0].end_lineno or 0) + 1)
    }
    lines = enumerate(source.splitlines(), 1)
    return sum(bool(text.strip()) and not text.lstrip().startswith("#") and i not in docs for i, text in lines)


def _request() -> tuple[dict[str, Any], dict[str, str]]:
    """A simulator's request as the endpoint sends it: the body, and the headers ``transport.post`` is given."""
    messages = [{"role": "system", "content": RETAIL.guidelines()}, {"role": "user", "content": AGENT_TURNS[0]}]
    body = {"model": "sim", "messages": messages, "temperature": 0.0, "max_tokens": 512}
    return body, {"Authorization": "Bearer EMPTY"}


def _exchanges(post: Callable[..., tuple[int, bytes]], url: str, pool: ThreadPoolExecutor, n: int) -> None:
    """``n`` threads, each sending 3 requests in a row and reading the replies, as the episodes' threads do."""
    body, headers = _request()

    def client(_: int) -> None:
        for _ in range(3):
            assert post(url, body, headers, 60.0)[0] == 200

    list(pool.map(client, range(n)))


async def _native(url: str, n: int) -> None:
    """The same on aiohttp with no thread at all, as an async episode loop would run it: tasks on the running event
    loop and a session of its own (ms-swift's next hook call runs on another loop), opened and closed here."""
    body, headers = _request()
    sent = {"Content-Type": "application/json", "Accept-Encoding": "identity", **headers}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=60.0, sock_read=60.0)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, trust_env=True, auto_decompress=False) as session:

        async def client() -> None:
            for _ in range(3):
                async with session.post(url, data=dumps(body).encode("utf-8"), headers=sent, timeout=timeout) as reply:
                    assert reply.status == 200
                    await reply.read()

        await asyncio.gather(*(client() for _ in range(n)))


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds (every thread's; the server runs in a process of its own)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _compare_table(figures: dict[str, list[tuple[float, float]]], sizes: dict[str, str]) -> None:
    """The fastest wall and the least CPU of each client's batches, and each against the best of all."""
    best = {name: (min(w for w, _ in runs), min(c for _, c in runs)) for name, runs in figures.items()}
    wall0, cpu0 = min(w for w, _ in best.values()), min(c for _, c in best.values())
    print("| client | code lines | wall s | / best | CPU s | / best |\n|---|---:|---:|---:|---:|---:|")
    for name, (wall, cpu) in best.items():
        print(f"| {name} | {sizes[name]} | {wall:.2f} | {wall / wall0:.2f}x | {cpu:.3f} | {cpu / cpu0:.2f}x |")


def http_compare(server: Any, episodes: int) -> None:
    """The transport's own HTTP/1.1 client against aiohttp: the exchange alone, then the training path's batch.
    Each client's batches are taken in turn with the others', so that drift hits them alike."""
    own, aio = "own: `loop.http11` + `loop.transport`", "aiohttp, from the threads (a loop thread of its own)"
    native = "aiohttp, no threads: tasks on the batch's event loop (no async episode loop exists)"
    aio_post = AiohttpPost()
    url = server.base_url + "/chat/completions"
    own_lines = sum(_lines(Path(module.__file__ or "").read_text(encoding="utf-8")) for module in (http11, transport))
    sizes = {own: str(own_lines), aio: str(_lines(textwrap.dedent(inspect.getsource(AiohttpPost)))), native: "-"}

    with ThreadPoolExecutor(episodes) as pool:
        runs: dict[str, Callable[[], object]] = {
            own: lambda: _exchanges(transport.post, url, pool, episodes),
            aio: lambda: _exchanges(aio_post, url, pool, episodes),
            native: lambda: asyncio.run(_native(url, episodes)),
        }
        for run in runs.values():  # warm-up: the pools hold a batch's connections
            run()
        exchanges: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        for _ in range(COMPARE_ROUNDS):
            for name, run in runs.items():
                exchanges[name].append(_timed(run))

    rollouts = training_batches(server)
    clients = {own: transport.post, aio: aio_post}
    batches: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    for round_ in range(COMPARE_ROUNDS + 1):  # the first round warms up
        for name, post in clients.items():
            with _posting(post):
                figures = rollouts(episodes)
            if round_:
                batches[name].append(figures)
    aio_post.close()

    print(f"\n### The HTTP client, against a library: {episodes} clients, then {episodes} rollouts\n")
    print(
        f"{COMPARE_ROUNDS} batches of each, in turn: the fastest wall and the least CPU of each (this process, every "
        "thread; the server runs in its own, adding its delay to each reply). Code lines: the client's, without "
        "docstrings, comments or blank lines (the endpoint's retry policy is the same for all).\n"
    )
    print(f"The exchange alone: {episodes} threads, 3 requests each in a row ({3 * episodes} requests).\n")
    _compare_table(exchanges, sizes)
    print(f"\nThe training path: {episodes} rollouts through SimulatedUserScheduler, 3 simulator replies each.\n")
    _compare_table(batches, sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    parser.add_argument("--http-compare", action="store_true", help="only the HTTP client against aiohttp")
    args = parser.parse_args()
    episodes, delay_s = (16, 0.05) if args.quick else (256, 0.2)
    flags = "".join(f" --{name}" for name, on in (("quick", args.quick), ("http-compare", args.http_compare)) if on)
    print(f"$ {COMMAND}{flags}")
    if not args.http_compare:
        cold_start(episodes, delay_s)
        harness_overhead(100 if args.quick else 5000)
        gold_throughput(16 if args.quick else None)
    with SimServerProcess(delay_s=delay_s, reply=scripted_reply, keep_alive=True) as server:
        if not args.http_compare:
            episode_loop(server, episodes, delay_s)
            scheduler_rollouts(server, episodes)
        http_compare(server, episodes)


if __name__ == "__main__":
    main()
