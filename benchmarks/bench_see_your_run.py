"""What seeing a run costs: the audit of a 10,000-completion run, and the live diagnostics' cost per GRPO step
against the same step without them (the episode viewer's: benchmarks/bench_viewer.py).

python benchmarks/bench_see_your_run.py [--quick]

- audit: a run folder of 10,000 completions (the seven planning rewards, groups of 8, 50 steps), audited whole
  (``load_run`` + every step's figures + the flags) against reading its completions.jsonl alone;
- live plugin: two real tiny ``swift rlhf`` planning runs of the same 6 steps, with and without
  ``plugins/diagnostics.py``: the callback's own time per step (``rewardkit/diagnostics/ms``) against ms-swift's
  ``step_time``, and the two runs' step times (``--quick``: the run with the plugin alone).

Ratios within one run, never timed assertions. ``--quick`` runs each at a small size, for CI.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import best_of

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["StrictFormat", "JsonValid", "ThinkLength", "ThinkQuality", "RewriteSimilarity", "ExpertMatch", "PlanCoverage"]
KEYS = [
    "strict_format",
    "json_valid",
    "think_length",
    "think_quality",
    "rewrite_similarity",
    "expert_match",
    "plan_coverage",
]


def fake_run(folder: Path, completions: int, steps: int) -> Path:
    """A run folder as ms-swift writes it: args.json and ``steps`` tables of scores (a reward None now and then)."""
    rng = random.Random(0)
    folder.mkdir(parents=True)
    args = {
        "reward_funcs": KEYS,
        "reward_weights": ["0.1", "0.1", "0.1", "0.1", "0.2", "0.3", "0.1"],
        "num_generations": 8,
    }
    (folder / "args.json").write_text(json.dumps(args))
    per_step = completions // steps
    with open(folder / "completions.jsonl", "w") as f:
        for step in range(1, steps + 1):
            table = {
                "step": [str(step)] * per_step,
                "prompt": ["p"] * per_step,
                "completion": ["<think>\nthought\n</think>\n\n<answer>\n{}\n</answer>"] * per_step,
            }
            for name in NAMES:
                table[name] = [None if rng.random() < 0.05 else rng.choice([0.0, 0.5, 1.0]) for _ in range(per_step)]
            f.write(json.dumps(table) + "\n")
    return folder


def bench_audit(completions: int) -> None:
    from rewardkit.files.jsonl import read_jsonl
    from rewardkit.runs.training.audit import load_run
    from rewardkit.runs.training.audit_report import audit

    folder = fake_run(Path(tempfile.mkdtemp()) / "run", completions, 50)
    read = best_of(lambda: list(read_jsonl(folder / "completions.jsonl")))
    whole = best_of(lambda: audit(load_run(folder)))
    print(
        f"audit of {completions} completions: {whole:.3f} s; reading completions.jsonl alone {read:.3f} s "
        f"({whole / read:.1f}x)"
    )


def grpo_steps(plugin: bool, steps: int) -> list[dict]:
    """The logged steps of a tiny planning GRPO run, with or without the live diagnostics."""
    from rewardkit.pipelines.grpo_log import grpo_steps as logged_steps
    from rewardkit.pipelines.planning import planning_corpus
    from rewardkit.pipelines.tiny_model import build_tiny_model, offline_env

    work = Path(tempfile.mkdtemp())
    model = build_tiny_model(work / "model", planning_corpus(ROOT / "examples" / "planning"))
    plugins = ["rewards/__init__.py", *(["plugins/diagnostics.py", "--callbacks", "rewardkit_diagnostics"] * plugin)]
    cmd = [
        str(Path(sys.executable).parent / "swift"),
        "rlhf",
        "recipes/planning/rewards.yaml",
        "--model",
        str(model),
        "--dataset",
        "examples/planning/grpo_tiny.jsonl",
        "--external_plugins",
        *plugins,
        "--enable_thinking",
        "true",
        "--tuner_type",
        "full",
        "--torch_dtype",
        "float32",
        "--max_steps",
        str(steps),
        "--num_generations",
        "4",
        "--per_device_train_batch_size",
        "8",
        "--max_completion_length",
        "32",
        "--logging_steps",
        "1",
        "--output_dir",
        str(work / "out"),
        "--check_model",
        "false",
        "--report_to",
        "none",
        "--dataloader_num_workers",
        "0",
        "--dataset_num_proc",
        "1",
        "--split_dataset_ratio",
        "0",
        "--save_strategy",
        "no",
        "--seed",
        "42",
    ]
    env = {k: v for k, v in {**os.environ, **offline_env()}.items() if k != "REWARDKIT_CONFIG"}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, timeout=1800)
    (log,) = (work / "out").glob("**/logging.jsonl")
    return logged_steps(log)


def _step_s(rows: list[dict]) -> float:
    """Seconds per step: ms-swift's own ``step_time``, the mean over the logged steps after the first (warm-up)."""
    times = [float(r["step_time"]) for r in rows[1:] or rows]
    return sum(times) / len(times)


def bench_plugin(steps: int, control: bool) -> None:
    """The callback's own time per step against the step; with ``control``, also against the run without it."""
    with_plugin = grpo_steps(True, steps)
    own = sum(r["rewardkit/diagnostics/ms"] for r in with_plugin) / len(with_plugin)
    seen = _step_s(with_plugin)
    line = f"live diagnostics: {own:.2f} ms of its own per step ({own / 1000 / seen:.3%} of a {seen:.2f} s step)"
    if control:
        base = _step_s(grpo_steps(False, steps))
        line += f"; a step takes {seen:.2f} s with it, {base:.2f} s without ({seen / base:.2f}x)"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI: the figures are not the point")
    quick = parser.parse_args().quick
    bench_audit(800 if quick else 10_000)
    bench_plugin(2 if quick else 6, control=not quick)  # --quick: one real run, the plugin's path


if __name__ == "__main__":
    main()
