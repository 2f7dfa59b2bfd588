"""Measure rewardkit's hot paths against the naive baseline, as ratios in one run.

    python benchmarks/bench_rewards.py            # --quick: small sizes, for CI

1. StrictFormat: the linear check vs the reference regex on adversarial completions.
2. Banned keywords: Aho-Corasick vs one regex alternation of the same words.
"""

from __future__ import annotations

import random
import re

from _timing import best_of, quick_flag

from rewardkit.rewards.strict_format import REFERENCE_PATTERN, matches_strict_format
from rewardkit.rewards.think_quality import BannedMatcher


def bench_strict_format(separators: int) -> tuple[str, float, float]:
    # n separators and no closing tag: the regex retries every split point.
    text = "<think>\n" + "\n</think>\n\n<answer>\n" * separators + "x"
    assert (REFERENCE_PATTERN.match(text) is not None) == matches_strict_format(text)
    return (
        f"StrictFormat, {separators:,} separators",
        best_of(lambda: REFERENCE_PATTERN.match(text), 1),
        best_of(lambda: matches_strict_format(text)),
    )


def bench_banned(n_words: int, n_chars: int) -> tuple[str, float, float]:
    rng = random.Random(0)
    # 100 CJK characters: the text and the words share a small alphabet.
    common = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 100))

    def word(k: int) -> str:
        return "".join(rng.choice(common) for _ in range(k))

    # Realistic: thousands of short words over the same alphabet as the text,
    # so the regex cannot skip ahead on a rare first character.
    words = sorted({word(rng.randint(3, 5)) for _ in range(n_words)})
    think = "".join(rng.choice(common) for _ in range(n_chars))
    words = [w for w in words if w not in think]
    alternation = re.compile("|".join(map(re.escape, words)))
    matcher = BannedMatcher(words)
    assert (alternation.search(think) is None) == (matcher.first(think) is None)
    return (
        f"banned words, {n_words:,} words x {n_chars:,} chars",
        best_of(lambda: alternation.search(think)),
        best_of(lambda: matcher.first(think)),
    )


def main() -> None:
    quick = quick_flag(__doc__)
    rows = [bench_strict_format(300 if quick else 3000), bench_banned(*((500, 1000) if quick else (5000, 10_000)))]
    print("| case | baseline ms | rewardkit ms | speed-up |\n|---|---:|---:|---:|")
    for name, base, ours in rows:
        print(f"| {name} | {base * 1e3:.2f} | {ours * 1e3:.3f} | {base / ours:,.0f}x |")


if __name__ == "__main__":
    main()
