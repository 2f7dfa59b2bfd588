"""End to end: real `swift rlhf --rlhf_type grpo` with the seven rewards on a tiny local model."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.pipelines.chain import swift_flags
from rewardkit.pipelines.grpo_log import grpo_steps
from rewardkit.pipelines.planning import planning_corpus
from rewardkit.pipelines.tiny_model import build_tiny_model, offline_env
from rewardkit.rewards import PLANNER_WEIGHTS, REWARDS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "planning"
SWIFT = str(Path(sys.executable).parent / "swift")
# What every tiny `swift rlhf` GRPO run here takes: full weights in float32 on CPU, offline, one process, seed 42.
CPU_FLAGS = swift_flags(
    {
        "tuner_type": "full",
        "torch_dtype": "float32",
        "max_length": 1024,
        "logging_steps": 1,
        "check_model": "false",
        "report_to": "none",
        "dataloader_num_workers": 0,
        "dataset_num_proc": 1,
        "split_dataset_ratio": 0,
        "use_vllm": "false",
        "seed": 42,
    }
)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", planning_corpus(EXAMPLES))


def plugin_form() -> str:
    import swift

    major, minor = (int(x) for x in swift.__version__.split(".")[:2])
    # ms-swift <= 4.4 imports a folder as a package; >= 4.5 loads files only.
    return "rewards/" if (major, minor) <= (4, 4) else "rewards/__init__.py"


def audited_by_hand(output_dir: Path, tmp_path: Path) -> list[tuple[dict, dict]]:
    """Per logged step, ``rewardkit audit``'s figures and the same figures computed here from completions.jsonl:
    totals ``sum(w * r)`` with None as 0, groups of ``num_generations`` consecutive rows."""
    from rewardkit.cli import main

    (args_file,) = output_dir.glob("**/args.json")
    args = json.loads(args_file.read_text(encoding="utf-8"))
    names = [REWARDS[k].__name__ for k in args["reward_funcs"]]
    weights, size = [float(w) for w in args["reward_weights"]], args["num_generations"]
    report = tmp_path / "audit.json"
    assert main(["audit", str(output_dir), "--json", str(report), "--out", str(tmp_path / "audit")]) == 0
    audited = json.loads(report.read_text(encoding="utf-8"))["steps"]
    tables = [json.loads(line) for line in (args_file.parent / "completions.jsonl").read_text().splitlines()]
    tables = list({t["step"][0]: t for t in reversed(tables)}.values())[::-1]  # a step logged twice is one step
    assert len(tables) == len(audited) > 0
    pairs = []
    for table, got in zip(tables, audited, strict=True):
        rows = range(len(table["completion"]))
        total = [sum(w * (table[n][i] or 0.0) for n, w in zip(names, weights, strict=True)) for i in rows]
        groups = [total[i : i + size] for i in range(0, len(total), size)]
        full = sum(w for w in weights if w > 0)
        hand = {
            "groups": len(groups),
            "zero_variance": sum(max(g) - min(g) <= 1e-6 for g in groups) / len(groups),
            "all_correct": sum(min(g) >= full - 1e-6 for g in groups) / len(groups),
            "all_wrong": sum(max(abs(x) for x in g) <= 1e-6 for g in groups) / len(groups),
            "means": {
                n: sum(v for v in table[n] if v is not None) / sum(v is not None for v in table[n]) for n in names
            },
        }
        if "num_turns" in table:
            hand["turns"] = {str(k): table["num_turns"].count(k) for k in sorted(set(table["num_turns"]))}
        pairs.append((got, hand))
    return pairs


def assert_audit_is_the_hand_count(output_dir: Path, tmp_path: Path) -> None:
    for got, hand in audited_by_hand(output_dir, tmp_path):
        assert got["groups"] == hand["groups"]
        for key in ("zero_variance", "all_correct", "all_wrong"):
            assert got[key] == pytest.approx(hand[key]), key
        assert {n: r["mean"] for n, r in got["rewards"].items()} == pytest.approx(hand["means"])
        assert got.get("turns", {}).get("counts") == hand.get("turns")


def read_steps(output_dir: Path) -> list[dict]:
    files = sorted(output_dir.glob("**/logging.jsonl"))
    assert files, f"no logging.jsonl under {output_dir}"
    return grpo_steps(files[-1])


@pytest.mark.e2e
@pytest.mark.compat
def test_grpo_two_steps_logs_all_seven_rewards(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "grpo"
    cmd = [
        *(SWIFT, "rlhf", "recipes/planning/rewards.yaml", "--external_plugins", plugin_form()),
        *("--model", str(tiny_model), "--dataset", str(EXAMPLES / "grpo_tiny.jsonl"), "--output_dir", str(out)),
        *("--enable_thinking", "true"),  # else the qwen3 template pre-fills an empty think
        *CPU_FLAGS,
        *swift_flags({"max_steps": 2, "num_generations": 4, "per_device_train_batch_size": 4}),
        *swift_flags({"max_completion_length": 48, "save_strategy": "no", "log_completions": "true"}),
    ]
    env = {**os.environ, **offline_env()}
    env.pop("REWARDKIT_CONFIG", None)  # the recipe's ENV block sets it
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    (tmp_path / "swift.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]

    steps = read_steps(out)
    assert len(steps) == 2
    for row in steps:
        means = {key: row.get(f"rewards/{REWARDS[key].__name__}/mean") for key in PLANNER_WEIGHTS}
        missing = [k for k, v in means.items() if v is None]
        assert not missing, f"no rewards/<Class>/mean for {missing}"
        assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in means.values())
        # ms-swift's total is the weighted sum of the per-reward means: the weights arrived.
        expected = sum(PLANNER_WEIGHTS[k] * v for k, v in means.items())
        assert row["reward"] == pytest.approx(expected, abs=1e-4)
    assert_audit_is_the_hand_count(out, tmp_path)
