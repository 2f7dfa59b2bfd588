"""Hostile inputs, calls under a time bound, and shrinking a failing string to a small one.

A hostile call runs in a forked child process where the platform has ``fork``: a regex of catastrophic
backtracking holds the GIL inside C code, so no thread or signal can stop it, but a child can be killed.
The child inherits the reward as it is (no pickling) and sends back only the verdict.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import random
import re
import re._parser as re_parser  # the stdlib's own reading of a pattern; only its literal characters are used
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rewardkit.testing.report import safe_text

GRACE_S = 0.5  # beyond the time limit, for the child's start and its reply
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a child gets when its parent dies


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
    "regex_bomb_open_tags": '<think><answer><tool_call>{"name": ' * 6_000,  # <x>(.*?)</x>: openings never closed
}


@dataclass(frozen=True)
class Outcome:
    """How one bounded call went: ``ok`` (``value`` is what the call returned), ``raised`` (``value`` is the
    exception, described), ``timeout`` or ``crashed`` (``value`` says how the process ended); ``seconds`` as the
    call measured itself."""

    status: str
    value: Any
    seconds: float


def describe(exc: BaseException) -> str:
    text = safe_text(f"{type(exc).__name__}: {exc}")
    return text if len(text) <= 200 else text[:199] + "…"


def _outcome(fn: Callable[[], Any]) -> Outcome:
    """``fn()`` timed; whatever it raises, ``SystemExit`` included, is its outcome (a reward that calls
    ``sys.exit`` has failed, it has not ended the run)."""
    start = time.perf_counter()
    try:
        value = fn()
    except (Exception, SystemExit) as exc:
        return Outcome("raised", describe(exc), time.perf_counter() - start)
    return Outcome("ok", value, time.perf_counter() - start)


def bounded(fn: Callable[[], Any], limit_s: float, isolate: bool = True) -> Outcome:
    """Run ``fn``, giving up after ``limit_s``: in a forked child that is killed (its value must pickle), else in
    a thread (a hang is then given up on, not stopped)."""
    if isolate and hasattr(os, "fork"):
        return _forked(fn, limit_s)
    box: list[Outcome] = []
    worker = threading.Thread(target=lambda: box.append(_outcome(fn)), daemon=True)
    worker.start()
    worker.join(limit_s + GRACE_S)
    return box[0] if box else Outcome("timeout", None, limit_s)


def _die_with_parent() -> None:
    """On Linux, SIGKILL this child when its parent dies, however it dies (a SIGTERM that no handler turns into an
    exception, as under pytest): a hostile call never outlives the run. Elsewhere the parent's ``finally`` is all."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _child(fn: Callable[[], Any], write_end: int) -> None:
    """In the forked child: signals end it (the parent's handlers are not inherited), the outcome goes down the
    pipe, and it leaves without running the parent's exit handlers."""
    try:
        _die_with_parent()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        outcome = _outcome(fn)
        try:
            data = pickle.dumps(outcome)
        except Exception as exc:  # a value that cannot travel back
            what = f"it returned a {type(outcome.value).__name__}, which" if outcome.status == "ok" else "its result"
            data = pickle.dumps(Outcome("raised", f"{what} cannot be sent back ({describe(exc)})", 0.0))
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view) :]
    finally:
        os._exit(0)


def ended(status: int) -> str:
    """How a child process ended, from its ``waitpid`` status, for a message."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"the process was killed by {name}"
    return f"the process exited with status {os.WEXITSTATUS(status)} before returning a result"


def _forked(fn: Callable[[], Any], limit_s: float) -> Outcome:
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except BaseException:  # no child (EAGAIN, ENOMEM): close both ends, and let the check report it
        os.close(read_end)
        os.close(write_end)
        raise
    if pid == 0:
        os.close(read_end)
        _child(fn, write_end)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + limit_s + GRACE_S
    reaped = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                return Outcome("timeout", None, limit_s)
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        reaped = True
    finally:  # a timeout, or a signal or Ctrl-C in the parent: the child never outlives the call
        os.close(read_end)
        if not reaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if not chunks:
        return Outcome("crashed", ended(status), 0.0)
    try:
        return pickle.loads(b"".join(chunks))
    except Exception as exc:  # a value that pickles but does not unpickle (an exception with odd arguments)
        return Outcome("raised", f"its result cannot be read back ({describe(exc)})", 0.0)


BOMB_CHARS = 100_000  # each pattern-derived bomb's length: a quadratic scan of it takes seconds, a linear one ms
_RUN_CHARS = ' \na0_.<{"字，１'  # a run of each (\\s, \\w, \\d, full-width, punctuation), then "!\\x00"


def _literal_runs(items: Any) -> list[str]:
    """The runs of literal characters in a parsed pattern, in order (``<tool_call>``, ``</think>``), nested groups,
    repeats, branches and look-arounds included."""
    runs: list[str] = []
    current: list[str] = []
    for op, av in items:
        if op is re_parser.LITERAL:
            current.append(chr(av))
            continue
        if current:
            runs.append("".join(current))
            current = []
        if op is re_parser.BRANCH:
            children = av[1]
        elif op is re_parser.GROUPREF_EXISTS:
            children = [av[1], av[2]]
        elif op in (re_parser.SUBPATTERN, re_parser.MAX_REPEAT, re_parser.MIN_REPEAT, re_parser.POSSESSIVE_REPEAT):
            children = [av[-1]]
        elif op in (re_parser.ASSERT, re_parser.ASSERT_NOT):
            children = [av[1]]
        elif op is re_parser.ATOMIC_GROUP:
            children = [av]
        else:
            children = []
        for child in children:
            if child is not None:
                runs += _literal_runs(child)
    if current:
        runs.append("".join(current))
    return runs


def regex_bombs(pattern: re.Pattern[str]) -> dict[str, str]:
    """Texts on which a backtracking ``pattern`` takes quadratic or exponential time: HOSTILE's regex bombs, and
    bombs built from the pattern itself: each run of its literal characters repeated (an opening never closed), all
    of them in order repeated, and a long run of one character that ends in characters its class may not hold, both
    as the text's start and after another character (a pattern anchored at the start, ``^\\s*(.*?)\\s*$``, eats a
    leading run whole and rescans only one that follows something else)."""
    bombs = {name: text for name, text in HOSTILE.items() if name.startswith("regex_bomb")}
    runs = list(dict.fromkeys(_literal_runs(re_parser.parse(pattern.pattern, pattern.flags))))
    for run in runs:
        bombs[f"repeated_literal:{run!r}"] = run * (BOMB_CHARS // len(run))
    if len(runs) > 1:
        joined = "".join(runs)
        bombs["repeated_literals"] = joined * (BOMB_CHARS // len(joined))
    for char in _RUN_CHARS:
        bombs[f"run:{char!r}"] = char * BOMB_CHARS + "!\x00"
        bombs[f"prefixed_run:{char!r}"] = "!" + bombs[f"run:{char!r}"]
    return bombs


def backtracks(pattern: re.Pattern[str], limit_s: float = 3.0) -> tuple[str, Outcome] | None:
    """``None`` when ``pattern`` scans each of its :func:`regex_bombs` within ``limit_s``; else the first bomb it did
    not, with how that scan went. Every start position is tried (``finditer``, as search, findall, sub and split
    do), then the whole text (``fullmatch``: nested quantifiers). One forked child scans them all and reports each
    as it finishes, so the limit holds per bomb and the child is killed on the first one over it."""
    bombs = list(regex_bombs(pattern).items())
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            _die_with_parent()
            for _, text in bombs:
                for _ in pattern.finditer(text):
                    pass
                pattern.fullmatch(text)
                os.write(write_end, b".")
        finally:
            os._exit(0)
    os.close(write_end)
    done = 0
    try:
        while done < len(bombs):
            started = time.perf_counter()
            if not select.select([read_end], [], [], limit_s)[0]:
                return bombs[done][0], Outcome("timeout", None, limit_s)
            if not os.read(read_end, 1):
                return bombs[done][0], Outcome("crashed", "the scanning process ended", time.perf_counter() - started)
            done += 1
    finally:
        os.close(read_end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return None


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
