"""The kit on TRL's own rewards finds what docs/testing.md says it finds (examples/testing/trl_rewards.py)."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLE = Path(__file__).parents[1] / "examples" / "testing" / "trl_rewards.py"


def test_the_kit_finds_what_the_docs_say_in_trl_rewards() -> None:
    reports = runpy.run_path(str(EXAMPLE))["reports"]()
    failed = {name: {c.name: c.detail for c in r.failed()} for name, r in reports.items()}
    # think_format_reward: an empty think with nothing after it ("<think>\n     \n</think>\n") scores 1.0 like the gold.
    assert set(failed["think_format_reward"]) == {"gaming:tags_only"}
    assert "scores 1, its gold 1" in failed["think_format_reward"]["gaming:tags_only"]
    # The overlong punishment is a closure: it cannot be pickled into a worker process.
    assert set(failed["soft_overlong_punishment"]) == {"pickle"}
    assert "Can't pickle local object" in failed["soft_overlong_punishment"]["pickle"]
    assert all(len(r.checks) == 28 for r in reports.values())  # 10 generic + 11 hostile + 7 probes
