"""Hostile inputs, calls under a time bound, and shrinking a failing string to a small one.

A hostile call runs in a forked child process where the platform has ``fork``: a regex of catastrophic
backtracking holds the GIL inside C code, so no thread or signal can stop it, but a child can be killed.
The child inherits the reward as it is (no pickling) and sends back only the verdict.
"""

from __future__ import annotations

import os
import pickle
import random
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GRACE_S = 0.5  # beyond the time limit, for the child's start and its reply


def _noise(chars: int, seed: int = 0) -> str:
    """``chars`` random code points, seeded: every plane below the surrogates, controls included."""
    rng = random.Random(seed)
    return "".join(map(chr, rng.choices(range(1, 0xD800), k=chars)))


def _deep_object(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


# name -> string. Each one has broken some reward somewhere: exceptions on empty or huge input, UTF-8 encoding of
# lone surrogates, C strings cut at NUL, json.loads recursion, and quadratic or exponential regex backtracking.
HOSTILE: dict[str, str] = {
    "empty": "",
    "whitespace": " \n\t\r\u3000" * 200,
    "noise_1mb": _noise(1 << 18) * 4,  # 1 Mi code points (about 3 MB of UTF-8)
    "nul_bytes": "\x00" * 4096,
    "lone_surrogates": "\ud800x\udfff" * 1024 + "\udc00",
    "deep_json": "[" * 100_000 + "]" * 100_000,
    "deep_json_in_answer": "<think>\n.\n</think>\n\n<answer>\n" + _deep_object(50_000) + "\n</answer>",
    "regex_bomb_letters": "a" * 30_000 + "!",  # (a+)+$, (\w+\s?)*$: exponential or quadratic
    "regex_bomb_spaces": " " * 30_000 + "!",  # \s+$, ^\s*(.*?)\s*$: quadratic
    "regex_bomb_tags": "<think>\n" + "\n</think>\n\n<answer>\n" * 50_000,  # .*? between repeated separators
}


@dataclass(frozen=True)
class Outcome:
    """How one bounded call went: ``ok`` (``problem`` is the judge's verdict, None = fine), ``raised``,
    ``timeout`` or ``crashed``; ``seconds`` as the call measured itself."""

    status: str
    problem: str | None
    seconds: float


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 200 else text[:199] + "…"


def _verdict(fn: Callable[[], Any], judge: Callable[[Any], str | None]) -> tuple[str, str | None, float]:
    start = time.perf_counter()
    try:
        value = fn()
    except Exception as exc:
        return "raised", describe(exc), time.perf_counter() - start
    seconds = time.perf_counter() - start
    return "ok", judge(value), seconds


def bounded(fn: Callable[[], Any], judge: Callable[[Any], str | None], limit_s: float, isolate: bool = True) -> Outcome:
    """Run ``fn`` and judge its value, giving up after ``limit_s`` (a forked child, killed; else a thread)."""
    if isolate and hasattr(os, "fork"):
        return _forked(fn, judge, limit_s)
    box: list[tuple[str, str | None, float]] = []
    worker = threading.Thread(target=lambda: box.append(_verdict(fn, judge)), daemon=True)
    worker.start()
    worker.join(limit_s + GRACE_S)
    return Outcome(*box[0]) if box else Outcome("timeout", None, limit_s)


def _forked(fn: Callable[[], Any], judge: Callable[[Any], str | None], limit_s: float) -> Outcome:
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except BaseException:  # no child (EAGAIN, ENOMEM): close both ends, and let the check report it
        os.close(read_end)
        os.close(write_end)
        raise
    if pid == 0:  # the child: score, send the verdict, leave without running the parent's exit handlers
        try:
            os.close(read_end)
            data = pickle.dumps(_verdict(fn, judge))
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
        finally:
            os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + limit_s + GRACE_S
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return Outcome("timeout", None, limit_s)
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    if not chunks:
        return Outcome("crashed", "the process died without a result (a C stack overflow?)", 0.0)
    return Outcome(*pickle.loads(b"".join(chunks)))


def shrink(text: str, fails: Callable[[str], bool], attempts: int = 24, budget_s: float = 10.0) -> str:
    """A shorter string that still ``fails``: chunks of halving size cut out greedily (delta debugging), within
    ``attempts`` tries and ``budget_s`` seconds. ``text`` itself must fail; the result is never longer."""
    stop = time.monotonic() + budget_s
    chunk = max(len(text) // 2, 1)
    while text and chunk >= 1:
        i = 0
        while i < len(text):
            if attempts <= 0 or time.monotonic() > stop:
                return text
            attempts -= 1
            candidate = text[:i] + text[i + chunk :]
            if fails(candidate):
                text = candidate  # keep the cut, try the same place again
            else:
                i += chunk
        if chunk == 1:
            break
        chunk //= 2
    return text


def show(text: str, limit: int = 60) -> str:
    """``text`` for a message: its repr, cut in the middle when long, and its length."""
    shown = repr(text)
    if len(shown) > limit:
        shown = shown[: limit // 2] + "…" + shown[-limit // 2 :]
    return f"{shown} ({len(text)} chars)"
