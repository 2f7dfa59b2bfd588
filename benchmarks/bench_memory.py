"""Process memory while the seven planning rewards score many long, unique completions: old cache vs byte-bounded.

    python benchmarks/bench_memory.py            # 20,480 completions of ~30 KB, batches of 64 (about a minute)
    python benchmarks/bench_memory.py --n 2048   # a quick look
    python benchmarks/bench_memory.py --quick    # 256, for CI: every path runs, the figures are not the point

Each scenario runs in a fresh subprocess (the two side by side) and reports its resident memory (``VmRSS``; peak
``VmHWM``, from ``/proc/self/status``) after the imports, the rewards and one warm-up batch ("before"), and after
scoring every batch ("after"), plus what the completion cache holds by its own count.

- **old**: what the cache did before it was bounded in bytes, ``lru_cache(maxsize=16384)`` on ``parse`` and
  ``read_plan``: the completion cache with an entry limit of 16,384 and a budget too large to bind.
- **bounded**: the default, ``$REWARDKIT_CACHE_MB`` = 64.

A completion is a unique ~30 KB think (a few lines of CJK reasoning, then a log of 64-character hex ids such as an
agent copies from tool output) and a valid one-step answer. The ids keep ThinkQuality's per-word n-gram statistics,
which dominate the scoring time, short enough for 20,480 completions to score in about a minute per scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from typing import Any

MIB = 1 << 20
BATCH = 64
SCENARIOS = {
    # name: ($REWARDKIT_CACHE_MB, entry limit or None)
    "old (lru_cache, 16,384 entries)": ("1000000", 16384),
    "bounded (default, 64 MiB)": ("", None),
}
CJK = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 2000))


def status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


class Completions:
    """Unique ~30 KB completions, cut from two random pools at offsets that differ per index (fast to make)."""

    def __init__(self, size: int = 30_000) -> None:
        rng = random.Random(0)
        self.prose = "".join(rng.choice(CJK) for _ in range(20_000))
        self.ids = " ".join(f"{rng.getrandbits(256):064x}" for _ in range(2_000))
        self.prose_chars = 500  # 1.5 KB of UTF-8
        self.id_chars = size - 3 * self.prose_chars - 200

    def __call__(self, i: int) -> str:
        p = (i * 7919) % (len(self.prose) - self.prose_chars)
        q = (i * 104_729) % (len(self.ids) - self.id_chars)
        think = f"第{i}条：{self.prose[p : p + self.prose_chars]}\n工具输出：{self.ids[q : q + self.id_chars]}"
        plan = {"补全后的问题": "查看经营周报", "plan": [{"专家": "数据分析专家", "处理问题": ["查看经营周报"]}]}
        return f"<think>\n{think}\n</think>\n\n<answer>\n{json.dumps(plan, ensure_ascii=False)}\n</answer>"


def child(n: int, maxsize: int | None) -> dict[str, Any]:
    """One scenario, in this process: score ``n`` unique completions with the seven rewards, in batches."""
    from rewardkit.rewards import PLANNING_REWARDS
    from rewardkit.rewards._parsing import COMPLETIONS, parse

    if maxsize is not None:
        COMPLETIONS.configure(maxsize=maxsize)
    rewards = [cls() for key, cls in PLANNING_REWARDS.items() if key != "answer_format"]
    assert len(rewards) == 7
    make = Completions()
    gold = json.dumps(
        {"补全后的问题": "查看经营周报", "plan": [{"专家": "数据分析专家", "处理问题": ["查看经营周报"]}]},
        ensure_ascii=False,
    )
    columns = {"solution": [gold] * BATCH, "experts": [["数据分析专家", "策略推荐专家"]] * BATCH}

    def score(batch: list[str]) -> None:
        for reward in rewards:
            reward(batch, **columns)

    score([make(-1 - i) for i in range(BATCH)])  # warm-up: the first batch allocates what every batch reuses
    COMPLETIONS.clear()
    parse.cache_clear()
    before, start = status_kib("VmRSS"), time.perf_counter()
    size = 0
    for b in range(0, n, BATCH):
        batch = [make(i) for i in range(b, min(n, b + BATCH))]
        size += sum(len(t.encode()) for t in batch)
        score(batch)
        del batch
    return {
        "before": before * 1024,
        "after": status_kib("VmRSS") * 1024,
        "peak": status_kib("VmHWM") * 1024,
        "entries": len(COMPLETIONS),
        "cached": COMPLETIONS.nbytes,
        "budget": COMPLETIONS.budget,
        "parses": parse.cache_info().misses,
        "mean_kb": size / n / 1000,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_480, help="unique completions per scenario (default 20,480)")
    parser.add_argument("--quick", action="store_true", help="256 completions, for CI (the figures are not the point)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--maxsize", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.n = 256
    if args.child:
        print(json.dumps(child(args.n, args.maxsize)))
        return

    print("$ python benchmarks/bench_memory.py" + ("" if args.n == 20_480 else f" --n {args.n}"))
    print(f"{args.n:,} unique completions, seven planning rewards, batches of {BATCH}; one fresh process each\n")
    children = {}
    for name, (mb, maxsize) in SCENARIOS.items():  # side by side: one process per scenario, each its own RSS
        env = {k: v for k, v in os.environ.items() if k not in ("REWARDKIT_CACHE_MB", "REWARDKIT_CONFIG")}
        if mb:
            env["REWARDKIT_CACHE_MB"] = mb
        cmd = [sys.executable, __file__, "--n", str(args.n), "--child", name]
        if maxsize is not None:
            cmd += ["--maxsize", str(maxsize)]
        children[name] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    rows = []
    for name, proc in children.items():
        out, _ = proc.communicate()
        if proc.returncode:
            sys.exit(f"scenario {name!r} failed (exit {proc.returncode})")
        rows.append((name, json.loads(out.strip().splitlines()[-1])))
    print(
        "| cache | RSS before MB | RSS after MB | growth MB | peak RSS MB | cache entries | cache holds MB "
        "| parses / completion | seconds |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(
            f"| {name} | {r['before'] / MIB:,.0f} | {r['after'] / MIB:,.0f} | {(r['after'] - r['before']) / MIB:+,.0f} "
            f"| {r['peak'] / MIB:,.0f} | {r['entries']:,} | {r['cached'] / MIB:,.1f} | {r['parses'] / args.n:.2f} "
            f"| {r['seconds']:.0f} |"
        )
    print(f"\nmean completion: {rows[0][1]['mean_kb']:.1f} KB (UTF-8); 'cache holds': the cache's own byte count")


if __name__ == "__main__":
    main()
