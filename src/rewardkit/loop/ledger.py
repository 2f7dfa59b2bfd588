"""The ledger of a model endpoint: what the loop asked of it and what that cost, one per role (user, agent, ...).

Every HTTP request :class:`~rewardkit.loop.endpoint.ChatEndpoint` sends is one entry: its latency and, when it
came back as a chat completion, the prompt and completion tokens the server reported. A request after the first of
a call is a **retry**; a call that raised after its retries is a **failure**; a reply served from the user
simulator's reply cache is a **cache hit** and sends nothing. Synthesis and evaluation report each role's ledger of
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
from typing import Any

import numpy as np


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
            f"{s['cache_hits']} cached), {s['prompt_tokens']}+{s['completion_tokens']} tokens{timing}{cost}"
        )
    return lines


class Ledger:
    """Thread-safe counts and latencies of one endpoint's requests."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.endpoint: str | None = None  # set by the endpoint that writes to it
        self._lock = threading.Lock()
        self._latencies: list[float] = []
        self._counts = dict.fromkeys(("requests", "retries", "failures", "cache_hits", "errors"), 0)
        self._tokens = {"prompt_tokens": 0, "completion_tokens": 0}

    def request(
        self, seconds: float, prompt_tokens: int = 0, completion_tokens: int = 0, retry: bool = False,
        error: bool = False,
    ) -> None:  # fmt: skip
        """One HTTP request: ``error`` when it did not come back as a usable completion."""
        with self._lock:
            self._latencies.append(float(seconds))
            self._counts["requests"] += 1
            self._counts["retries"] += retry
            self._counts["errors"] += error
            self._tokens["prompt_tokens"] += prompt_tokens
            self._tokens["completion_tokens"] += completion_tokens

    def failure(self) -> None:
        """A call that raised after its retries (or at once, on a configuration error)."""
        with self._lock:
            self._counts["failures"] += 1

    def cache_hit(self) -> None:
        with self._lock:
            self._counts["cache_hits"] += 1

    def summary(self, price_per_mtok: tuple[float, float] | None = None) -> dict[str, Any]:
        """Counts, tokens, latency percentiles (seconds) and, with a price (USD per million prompt and completion
        tokens), the cost."""
        with self._lock:
            latencies = list(self._latencies)
            out: dict[str, Any] = {"role": self.role, "endpoint": self.endpoint, **self._counts, **self._tokens}
        percentiles = np.percentile(latencies, [50, 90, 99]).tolist() if latencies else [None] * 3
        out["latency_s"] = dict(zip(("p50", "p90", "p99"), percentiles, strict=True))
        if price_per_mtok is not None:
            prompt, completion = price_per_mtok
            cost = (out["prompt_tokens"] * prompt + out["completion_tokens"] * completion) / 1e6
            out["cost_usd"] = round(cost, 6)
        return out
