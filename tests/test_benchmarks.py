"""Every benchmark runs, in its quick mode (small sizes, no figure asserted), so one that breaks fails the build.

`make bench` runs them at full size; a benchmark added to benchmarks/ is run here and must be listed there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def test_make_bench_runs_every_benchmark() -> None:
    listed = re.findall(r"benchmarks/(bench_\w+\.py)", (ROOT / "Makefile").read_text(encoding="utf-8"))
    assert sorted(listed) == [p.name for p in BENCHMARKS]


@pytest.mark.e2e
@pytest.mark.parametrize("script", BENCHMARKS, ids=[p.stem for p in BENCHMARKS])
def test_the_benchmark_runs_in_quick_mode(script: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, str(script), "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert len(proc.stdout.strip().splitlines()) >= 2, proc.stdout  # it printed its figures
