"""Adding a reward is one file: written in an installed package, found through the ``rewardkit.rewards`` entry points.

The package here is real and minimal: a folder on ``PYTHONPATH`` with the reward's module (the one ``docs/rewards.md``
shows) and a ``.dist-info`` whose ``entry_points.txt`` names it, which is what ``pip install`` leaves. Every
consumer then sees the reward without a line of rewardkit changed: ``rewardkit rewards`` (and ms-swift's ``orms``),
the registry, ``rewardkit config example``, ``rewardkit lint RECIPE`` and the contract test, run on it with its own
test file beside it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The reward is the one docs/rewards.md shows ("Add a reward"), read from the page so that the two cannot drift.
DOCS = (ROOT / "docs" / "rewards.md").read_text(encoding="utf-8")
REWARD = re.search(r"```python\n# file: brevity/answer_brevity.py\n(.*?)```", DOCS, re.DOTALL).group(1)

# Its own test: the scores on the contract batch, whose completions are 150, 146, 24, 0 and 87 characters long:
# 120/150 = 0.8, 120/146 = 0.821918, then 1.0 for the three within 120.
OWN_TEST = "CONTRACT = [0.8, 0.821918, 1.0, 1.0, 1.0]\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed package: its module, its own test, and the metadata ``pip install`` writes."""
    root = tmp_path_factory.mktemp("site")
    (root / "brevity").mkdir()
    (root / "brevity" / "__init__.py").write_text("", encoding="utf-8")
    (root / "brevity" / "answer_brevity.py").write_text(REWARD, encoding="utf-8")
    (root / "test_answer_brevity.py").write_text(OWN_TEST, encoding="utf-8")
    meta = root / "brevity-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: brevity\nVersion: 0.1\n", encoding="utf-8")
    (meta / "entry_points.txt").write_text("[rewardkit.rewards]\nanswer_brevity = brevity.answer_brevity\n")
    return root


def run(site: Path, *argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REWARDKIT_CONFIG"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=600, env=env, cwd=cwd)


def test_the_registry_and_rewards_list_find_it(site: Path) -> None:
    done = run(site, "-m", "rewardkit.cli", "rewards")
    assert done.returncode == 0, done.stderr[-2000:]
    listed = [line.split()[:2] for line in done.stdout.splitlines()]
    # order 80: after plan_coverage (70), before task_completion (100)
    keys = [key for key, _ in listed]
    assert ["answer_brevity", "AnswerBrevity"] in listed
    assert keys.index("plan_coverage") + 1 == keys.index("answer_brevity") == keys.index("task_completion") - 1
    code = (
        "from rewardkit.rewards import REWARDS, SETS, AnswerBrevity, register\n"
        "orms = register({})\n"
        "print(REWARDS['answer_brevity'] is AnswerBrevity is orms['answer_brevity'], SETS['planner'].keys[-1],"
        " AnswerBrevity(config={'answer_brevity': {'max_chars': 2}})(['abcd']))\n"
    )
    done = run(site, "-c", code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "answer_brevity", "[0.5]"]  # 2 / 4


def test_config_example_carries_its_section(site: Path) -> None:
    done = run(site, "-m", "rewardkit.cli", "config", "example")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(AnswerBrevityConfig, brevity/answer_brevity.py)" in done.stdout.replace("\n# ", " ")
    assert "answer_brevity:\n  # Characters a completion may have at full score.\n  max_chars: 120" in done.stdout
    bad = run(
        site, "-c", "from rewardkit.rewards import AnswerBrevity as A; A(config={'answer_brevity': {'max_chars': 0}})"
    )
    assert "overrides: answer_brevity.max_chars: 0 is less than the minimum of 1" in bad.stderr


def test_lint_recipe_scores_it(site: Path, tmp_path: Path) -> None:
    from rewardkit.data_builders import InputSpec
    from rewardkit.data_builders.planning.grpo import GrpoOptions, build_grpo
    from rewardkit.recipes import EXAMPLES

    rows, _ = build_grpo([InputSpec(EXAMPLES / "annotated_p1.jsonl", None)], GrpoOptions())
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[:12]), encoding="utf-8")
    recipe = tmp_path / "set.yaml"
    recipe.write_text('reward_funcs: ["json_valid", "answer_brevity"]\nreward_weights: ["1", "0"]\n', encoding="utf-8")
    report = tmp_path / "lint.json"
    done = run(site, "-m", "rewardkit.cli", "lint", str(recipe), "--dataset", str(data), "--json", str(report))
    assert done.returncode in (0, 1), done.stderr[-2000:]
    found = json.loads(report.read_text(encoding="utf-8"))["rewards"]["answer_brevity"]
    assert found["weight"] == 0 and found["error_rate"] == 0 and 0 < found["gold_mean"] <= 1


def test_the_contract_test_runs_on_it(site: Path) -> None:
    done = run(
        site, "-m", "pytest", "tests/test_reward_contract.py", "-q", "-k", "answer_brevity", "-p", "no:cacheprovider"
    )
    assert done.returncode == 0, done.stdout[-3000:]
    summary = done.stdout.strip().splitlines()[-1]
    passed = int(summary.split(" passed")[0].split()[-1])
    # its own test and fixtures, its documented columns, the pinned scores, the declaration against the docstring,
    # the testing kit, the gaming probes, unknown columns ignored: 7, and it reads no column to drop or resize
    assert passed == 7 and "failed" not in summary, summary


# The agent reward docs/rewards.md shows ("A reward on the agent's episode"), read from the page as the one above.
AGENT_REWARD = re.search(r"```python\n# file: closing/polite_closing.py\n(.*?)```", DOCS, re.DOTALL).group(1)


def test_the_agent_reward_reads_the_episode_record_as_the_messages() -> None:
    import doctest
    import types

    from rewardkit.envs import get_domain
    from rewardkit.loop.config import RolloutLimits
    from rewardkit.loop.drive import run_episode
    from rewardkit.loop.gold import GoldAgent
    from rewardkit.loop.user_sim.scripted import ScriptedSimulator

    module = types.ModuleType("polite_closing")
    exec(compile(AGENT_REWARD, "docs/rewards.md", "exec"), module.__dict__)
    assert doctest.testmod(module).failed == 0
    reward = module.PoliteClosing()
    retail = get_domain("retail")
    runs = [
        run_episode(retail, task, GoldAgent(task), ScriptedSimulator(), RolloutLimits())
        for task in list(retail.tasks().values())[:6]
    ]
    live = [r.infos.to_json() for r in runs]
    by_record = reward([""] * 6, messages=[r.messages for r in runs], rollout_infos=live)
    by_messages = reward([""] * 6, messages=[r.messages for r in runs])  # an offline row: the messages parsed
    assert by_record == by_messages == [1.0] * 6  # the gold agent closes with "Is there anything else I can ...?"
    curt = [{**cell, "agent_said": [*cell["agent_said"][:-1], "Done."]} for cell in live]  # the record wins
    assert reward([""] * 6, messages=[r.messages for r in runs], rollout_infos=curt) == [0.0] * 6
    failed = [{**cell, "termination": "user_sim_error"} for cell in live]  # the simulator failed: left out
    assert reward([""] * 6, messages=[r.messages for r in runs], rollout_infos=failed) == [None] * 6
