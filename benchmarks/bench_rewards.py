"""Measure rewardkit's hot paths against the naive baseline, as ratios in one run.

    python benchmarks/bench_rewards.py

1. StrictFormat: the linear check vs the reference regex on adversarial completions.
2. Banned keywords: Aho-Corasick vs one regex alternation of the same words.
"""

from __future__ import annotations

import random
import re

from _timing import best_of

from rewardkit.rewards.strict_format import REFERENCE_PATTERN, matches_strict_format
from rewardkit.rewards.think_quality import BannedMatcher


def bench_strict_format() -> tuple[str, float, float]:
    # n separators and no closing tag: the regex retries every split point.
    text = "<think>\n" + "\n</think>\n\n<answer>\n" * 3000 + "x"
    assert (REFERENCE_PATTERN.match(text) is not None) == matches_strict_format(text)
    return (
        "StrictFormat, 3k separators",
        best_of(lambda: REFERENCE_PATTERN.match(text), 1),
        best_of(lambda: matches_strict_format(text)),
    )


def bench_banned() -> tuple[str, float, float]:
    rng = random.Random(0)
    # 100 CJK characters: the text and the words share a small alphabet.
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


def main() -> None:
    rows = [bench_strict_format(), bench_banned()]
    print("| case | baseline ms | rewardkit ms | speed-up |\n|---|---:|---:|---:|")
    for name, base, ours in rows:
        print(f"| {name} | {base * 1e3:.2f} | {ours * 1e3:.3f} | {base / ours:,.0f}x |")


if __name__ == "__main__":
    main()
