"""What the episode viewer costs at 1,000 and 10,000 episodes: building the page against reading the log, and the
page in a browser (load, open an episode, search every episode's text, draw the next page of rows).

    python benchmarks/bench_viewer.py            # 1,000 and 10,000 episodes
    python benchmarks/bench_viewer.py --quick    # 40 episodes, for CI: every path runs, no figure to read

The log is real: the gold agent on retail's 38 test tasks, four trials each, cut at five turns, so that 88 of its
152 episodes fail (most with a database that is not the gold's), replicated with fresh trial numbers to the size.
Each size is timed three ways, best of three each:
- read: ``read_log`` alone (every line parsed and checked), the floor any viewer pays;
- build: ``rewardkit view`` on the same log (read, build the page's data, render the HTML, write the page), its
  episodes carrying the checks and the diff their run recorded, printed with its ratio to the read (build/read);
- replayed: the same log with those two fields removed, as a log written before runs recorded them, which the
  viewer replays (1,000 only: it grows with the failing episodes).
The browser is headless Chromium (Debian's ``chromium``, through Playwright; skipped without them), timed inside the
page: from navigation to the first page of rows drawn, opening the first failing episode, a search for one word in
every episode's messages (the first search, which reads every episode's text), and the next page of rows.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _timing import best_of, quick_flag

from rewardkit.cli import main as rewardkit


def gold_log(work: Path) -> list[dict[str, Any]]:
    out = work / "eval"
    argv = ["eval", "agent", "--agent", "gold", "--split", "test", "--trials", "4", "--max-turns", "5"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert rewardkit([*argv, "--out-dir", str(out), "--no-progress"]) == 0
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]


def replicate(records: list[dict[str, Any]], n: int, path: Path, recorded: bool = True) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            r = dict(records[i % len(records)], trial=i)
            if not recorded:
                r.pop("checks", None)
                r.pop("diff", None)
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def view(log: Path) -> Path:
    page = log.with_suffix(".html")
    with contextlib.redirect_stdout(io.StringIO()):  # its one line per page
        assert rewardkit(["view", str(log), "--domain", "retail", "--out", str(page)]) == 0
    return page


def browser_times(page: Path) -> dict[str, float] | None:
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if chromium is None:
        return None
    flags = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="rk-bench-"), executable_path=chromium, headless=True, args=flags
        )
        tab = context.new_page()
        start = time.perf_counter()
        tab.goto(page.as_uri())
        tab.wait_for_selector("tr.episode")
        loaded = time.perf_counter() - start
        inside = tab.evaluate(
            """() => {
              const t = (fn) => { const s = performance.now(); fn(); return (performance.now() - s) / 1000; };
              const fail = DATA.episodes.find((e) => !e.passed && e.diff && e.diff.length);
              const out = {open: t(() => open(fail.id))};
              document.getElementById("q").value = "refund";
              out.search = t(() => refresh());
              out.found = state.rows.length;
              document.getElementById("q").value = "";
              refresh();
              out.page = t(() => { state.page = 1; drawPage(); });
              return out;
            }"""
        )
        context.close()
    return {"load": loaded, **inside}


def main() -> None:
    quick = quick_flag(__doc__)
    from rewardkit.runs.viewer.page import read_log

    work = Path(tempfile.mkdtemp(prefix="rk-bench-viewer-"))
    records = gold_log(work)
    failing = sum(r["reward"] != 1.0 for r in records)
    print(f"log: {len(records)} gold episodes cut at five turns, {failing} failing, replicated")
    for n in (40,) if quick else (1_000, 10_000):
        log = replicate(records, n, work / f"log-{n}.jsonl")
        read = best_of(lambda log=log: read_log(log))
        built = best_of(lambda log=log: view(log))
        page = view(log)
        line = f"{n:>6,} episodes: read {read:.2f} s, build {built:.2f} s (build/read {built / read:.2f})"
        if n <= 1_000:
            old = replicate(records, n, work / f"old-{n}.jsonl", recorded=False)
            replayed = best_of(lambda old=old: view(old), repeat=1)
            line += f", replayed {replayed:.2f} s ({replayed / built:.0f}x)"
        line += f"; page {page.stat().st_size / 1e6:.1f} MB"
        times = browser_times(page)
        if times is None:
            line += "; browser skipped (needs Debian's chromium and playwright)"
        else:
            line += (
                f"; Chromium: loaded {times['load']:.2f} s, open {times['open'] * 1e3:.0f} ms, first search "
                f"{times['search'] * 1e3:.0f} ms ({times['found']:,} found), next page {times['page'] * 1e3:.0f} ms"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
