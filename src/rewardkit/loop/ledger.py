"""The ledger of a model endpoint: what the loop asked of it and what that cost, one per role (user, agent, ...).

Every HTTP request :class:`~rewardkit.loop.endpoint.ChatEndpoint` sends is one entry: its latency and, when it
came back as a chat completion, the prompt and completion tokens the server reported. A request after the first of
a call is a **retry**; a call that raised after its retries is a **failure**; a reply served from the user
simulator's reply cache is a **cache hit** and sends nothing; an answer a JSON role refused (not JSON, or not what its
schema asks for) and asked for again is **invalid**; a call refused at once because the endpoint's breaker is open
(too many failures in a row) is **short-circuited**. Synthesis and evaluation report each role's ledger of
the process's own calls (episodes resumed from a log were paid for earlier), with a cost when a price is given.

>>> ledger = Ledger("user")
>>> ledger.request(0.2, prompt_tokens=1000, completion_tokens=50)
>>> ledger.request(0.4, prompt_tokens=1000, completion_tokens=150, retry=True)
>>> ledger.cache_hit()
>>> s = ledger.summary(price_per_mtok=(0.5, 2.0))  # USD per million prompt and completion tokens
>>> (s["requests"], s["retries"], s["cache_hits"], s["prompt_tokens"], s["completion_tokens"], s["cost_usd"])
(2, 1, 1, 2000, 200, 0.0014)
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

Mark = tuple[int, int, int, int, int]  # requests, failures, cache hits, invalid answers, short circuits so far
START: Mark = (0, 0, 0, 0, 0)


def ledger_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """One line per endpoint: ``user http://...: 12 requests (1 retry, 0 failed, 3 cached), 4100+380 tokens, p50
    0.21 s p99 0.90 s, $0.0021``."""
    lines = []
    for s in summaries:
        latency = s["latency_s"]
        timing = "" if latency["p50"] is None else f", p50 {latency['p50']:.2f} s p99 {latency['p99']:.2f} s"
        cost = f", ${s['cost_usd']:.4f}" if "cost_usd" in s else ""
        lines.append(
            f"{s['role']} {s['endpoint']}: {s['requests']} requests ({s['retries']} retried, {s['failures']} failed, "
            f"{s['cache_hits']} cached{_refused(s)}), {s['prompt_tokens']}+{s['completion_tokens']} tokens"
            f"{timing}{cost}"
        )
    return lines


def _refused(s: dict[str, Any]) -> str:
    parts = [f"{s[k]} {word}" for k, word in (("invalid", "invalid"), ("short_circuited", "short-circuited")) if s[k]]
    return "".join(f", {p}" for p in parts)


class Ledger:
    """Thread-safe record of one endpoint's requests; every ledger of the process is in :func:`ledgers`."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.endpoint: str | None = None  # set by the endpoint that writes to it
        self._lock = threading.Lock()
        # One row per request: seconds, prompt tokens, completion tokens, retry, error.
        self._requests: list[tuple[float, int, int, bool, bool]] = []
        self._failures = self._hits = self._invalid = self._open = 0
        _LEDGERS.add(self)

    def request(
        self,
        seconds: float,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        retry: bool = False,
        error: bool = False,
    ) -> None:
        """One HTTP request: ``error`` when it did not come back as a usable completion."""
        with self._lock:
            self._requests.append((float(seconds), prompt_tokens, completion_tokens, retry, error))

    def failure(self) -> None:
        """A call that raised after its retries (or at once, on a configuration error)."""
        with self._lock:
            self._failures += 1

    def cache_hit(self) -> None:
        with self._lock:
            self._hits += 1

    def invalid(self) -> None:
        """An answer that came back but was refused (a JSON role asks again with the problem)."""
        with self._lock:
            self._invalid += 1

    def short_circuit(self) -> None:
        """A call the open breaker refused without sending it."""
        with self._lock:
            self._open += 1

    def summary(self, price_per_mtok: tuple[float, float] | None = None, since: Mark = START) -> dict[str, Any]:
        """Counts, tokens, latency percentiles (seconds) and, with a price (USD per million prompt and completion
        tokens), the cost; of everything, or of what came after the mark ``since``."""
        return self.window(since, price_per_mtok)[0]

    def window(self, since: Mark, price_per_mtok: tuple[float, float] | None = None) -> tuple[dict[str, Any], Mark]:
        """The summary of what came after ``since``, and the mark that ends it (taken together, so that the next
        window starts exactly where this one ends)."""
        with self._lock:
            rows = self._requests[since[0] :]
            until = (len(self._requests), self._failures, self._hits, self._invalid, self._open)
            failures, hits, invalid, opened = (now - then for now, then in zip(until[1:], since[1:], strict=True))
        out: dict[str, Any] = {
            "role": self.role,
            "endpoint": self.endpoint,
            "requests": len(rows),
            "retries": sum(r[3] for r in rows),
            "failures": failures,
            "cache_hits": hits,
            "errors": sum(r[4] for r in rows),
            "invalid": invalid,
            "short_circuited": opened,
            "prompt_tokens": sum(r[1] for r in rows),
            "completion_tokens": sum(r[2] for r in rows),
        }
        percentiles = np.percentile([r[0] for r in rows], [50, 90, 99]).tolist() if rows else [None] * 3
        out["latency_s"] = dict(zip(("p50", "p90", "p99"), percentiles, strict=True))
        if price_per_mtok is not None:
            out["cost_usd"] = cost(out, price_per_mtok)
        return out, until


_LEDGERS: weakref.WeakSet[Ledger] = weakref.WeakSet()


def ledgers() -> list[Ledger]:
    """Every ledger of this process still in use (the live GRPO diagnostics read them step by step)."""
    return sorted(_LEDGERS, key=lambda ledger: (ledger.role, ledger.endpoint or ""))


def cost(summary: dict[str, Any], price_per_mtok: tuple[float, float]) -> float:
    """USD for a summary's tokens at ``price_per_mtok`` (per million prompt and completion tokens)."""
    prompt, completion = price_per_mtok
    return round((summary["prompt_tokens"] * prompt + summary["completion_tokens"] * completion) / 1e6, 6)
