"""Importing rewardkit's libraries has no side effects: no ms-swift, no registration.

Each import runs in a fresh interpreter, since this test process has usually imported ms-swift already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Modules a user, a builder or a rollout worker imports without running ms-swift.
SWIFT_FREE = (
    "rewardkit.rewards",
    "rewardkit.rewards.answers",
    "rewardkit.data_builders.planning.sft",
    "rewardkit.data_builders.planning.grpo",
    "rewardkit.data_builders.tau2",
    "rewardkit.envs",
    "rewardkit.loop.episode",
    "rewardkit.pipelines.grpo_log",
    "rewardkit.runs.stats.scoring",
)

PROBE = """
import json, sys
import {module}
print(json.dumps({{"swift": sorted(m for m in sys.modules if m == "swift" or m.startswith("swift."))}}))
"""


@pytest.mark.parametrize("module", SWIFT_FREE)
def test_import_does_not_import_swift(module: str) -> None:
    # A $REWARDKIT_CONFIG that does not exist fails any module that reads the config at import time.
    env = {**os.environ, "REWARDKIT_CONFIG": str(ROOT / "no-such-config.yaml")}
    code = PROBE.format(module=module)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"swift": []}


def test_answers_reexports_the_private_definitions() -> None:
    # A facade, not a copy: builders, summary and rewards share one parse cache and one schema per spec.
    from rewardkit.rewards import _parsing, _schema, _text, answers

    assert answers.parse is _parsing.parse and answers.read_plan is _parsing.read_plan
    assert answers.load_schema is _schema.load_schema and answers.AnswerSchema is _schema.AnswerSchema
    assert answers.normalize_name is _text.normalize_name
    assert all(hasattr(answers, name) for name in answers.__all__)
