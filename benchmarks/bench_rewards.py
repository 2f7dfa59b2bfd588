"""Measure rewardkit's hot paths against the naive baseline, as ratios in one run.

    python benchmarks/bench_rewards.py

1. StrictFormat: the linear check vs the seed regex on adversarial completions.
2. Banned keywords: Aho-Corasick vs one regex alternation of the same words.
3. Shared parsing: seven rewards on one batch with the parse cache vs cleared
   before every reward (what seven independent parsers would cost).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from pathlib import Path

from rewardkit.rewards import REWARDS
from rewardkit.rewards._parsing import parse, read_plan
from rewardkit.rewards.strict_format import SEED_PATTERN, matches_seed_format
from rewardkit.rewards.think_quality import BannedMatcher
from rewardkit.scoring import read_jsonl


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_strict_format() -> tuple[str, float, float]:
    # n separators and no closing tag: the regex retries every split point.
    text = "<think>\n" + "\n</think>\n\n<answer>\n" * 3000 + "x"
    assert (SEED_PATTERN.match(text) is not None) == matches_seed_format(text)
    return (
        "StrictFormat, 3k separators",
        best_of(lambda: SEED_PATTERN.match(text), 1),
        best_of(lambda: matches_seed_format(text)),
    )


def bench_banned() -> tuple[str, float, float]:
    rng = random.Random(0)
    # The 100 most frequent Chinese characters: the text and the words share an alphabet.
    common = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 100))

    def word(k: int) -> str:
        return "".join(rng.choice(common) for _ in range(k))

    # Realistic: thousands of short words over the same alphabet as the text,
    # so the regex cannot skip ahead on a rare first character.
    words = sorted({word(rng.randint(3, 5)) for _ in range(5000)})
    think = "".join(rng.choice(common) for _ in range(10_000))
    words = [w for w in words if w not in think]
    alternation = re.compile("|".join(map(re.escape, words)))
    matcher = BannedMatcher(words)
    assert (alternation.search(think) is None) == (matcher.first(think) is None)
    return (
        "banned words, 5k words x 10k chars",
        best_of(lambda: alternation.search(think)),
        best_of(lambda: matcher.first(think)),
    )


def bench_shared_parse() -> tuple[str, float, float]:
    rows = read_jsonl(Path(__file__).resolve().parents[1] / "examples/planning/completions.jsonl")
    # Distinct strings, so the cache cannot hit across rows.
    texts = [row["completion"].replace("<think>\n", f"<think>\n{i} ", 1) for i, row in enumerate(rows * 26)][:256]
    columns = {k: [row[k] for row in rows * 26][:256] for k in ("solution", "experts")}
    rewards = [cls() for cls in REWARDS.values()]

    def isolated() -> None:
        for reward in rewards:
            parse.cache_clear()
            read_plan.cache_clear()
            reward(texts, **columns)

    def shared() -> None:
        parse.cache_clear()
        read_plan.cache_clear()
        for reward in rewards:
            reward(texts, **columns)

    return "7 rewards x 256 completions", best_of(isolated), best_of(shared)


def main() -> None:
    rows = [bench_strict_format(), bench_banned(), bench_shared_parse()]
    print("| case | baseline ms | rewardkit ms | speed-up |\n|---|---:|---:|---:|")
    for name, base, ours in rows:
        print(f"| {name} | {base * 1e3:.2f} | {ours * 1e3:.3f} | {base / ours:,.0f}x |")


if __name__ == "__main__":
    main()
