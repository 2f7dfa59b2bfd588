"""Timing shared by the benchmarks (run as scripts, so this imports as a sibling module)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

QUICK_HELP = "small sizes, for CI: every path runs, the figures are not the point"


def quick_flag(doc: str | None) -> bool:
    """The command line of a benchmark whose one option is ``--quick``: whether it was given."""
    parser = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    return bool(parser.parse_args().quick)


def per_call(fn: Callable[[], object], n: int, repeat: int = 3) -> float:
    """Seconds per call of ``fn``: the best of ``repeat`` runs of ``n`` calls (the least disturbed run)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Seconds of one call of ``fn``: the least of ``repeat`` calls (the least disturbed one)."""
    return per_call(fn, 1, repeat)
