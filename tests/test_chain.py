"""The chain skeleton both `recipe run` chains share: a marker without a key is broken output naming it, the
planning GRPO check, whether a recipe saves, and both chains launching GRPO alike (with a stand-in `swift`)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ctx_for

from rewardkit.pipelines.chain import recipe_saves
from rewardkit.pipelines.planning import Options, PlanningPipeline
from rewardkit.pipelines.stages import BrokenOutput, Context
from rewardkit.pipelines.tau2 import Options as Tau2Options
from rewardkit.pipelines.tau2 import Tau2Pipeline
from rewardkit.recipes import EXAMPLES, recipe_path


# -- the chain skeleton: marker keys, and the GRPO stages of both chains -------------------------------------------
def grpo_run(root: Path, steps: int = 1) -> Path:
    """What `swift rlhf` leaves in its run directory: logging.jsonl with ``steps`` logged steps."""
    run = root / "v0-20250101-000000"
    run.mkdir(parents=True, exist_ok=True)
    rows = [{"reward": 0.5, "global_step/max_steps": f"{i + 1}/{steps}"} for i in range(steps)]
    (run / "logging.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


@pytest.mark.parametrize(
    ("chain", "check", "result", "key"),
    [
        ("tau2", "check_data", {}, "dir"),
        ("tau2", "check_data", {"dir": "d", "kept": 1, "grpo_rows": 1}, "tasks"),
        ("tau2", "check_model", {}, "path"),
        ("tau2", "check_sft", {}, "checkpoint"),
        ("tau2", "check_grpo", {"run_dir": "RUN"}, "checkpoint"),  # the tiny tau2 GRPO saves its last step
        ("tau2", "check_eval", {"train": "d"}, "test"),
        ("tau2", "check_summary", {}, "summary"),
        ("planning", "check_model", {"data": str(EXAMPLES.resolve()), "path": "MODEL"}, "vocab"),
        ("planning", "check_build", {"data": str(EXAMPLES.resolve())}, "reports"),
        ("planning", "check_sft", {}, "checkpoint"),
        ("planning", "check_grpo", {}, "run_dir"),
        ("planning", "check_summary", {}, "summary"),
    ],
)
def test_a_marker_without_a_key_is_broken_output_naming_the_key(
    built: Path, tmp_path: Path, chain: str, check: str, result: dict[str, Any], key: str
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "summary.json").write_text('{"pass_hat_k": []}')  # a whole eval output, for check_eval
    paths = {"RUN": str(grpo_run(tmp_path / "grpo")), "MODEL": str(built / "tiny-model"), "d": str(tmp_path / "d")}
    result = {k: paths.get(v, v) if isinstance(v, str) else v for k, v in result.items()}
    pipeline = Tau2Pipeline(Tau2Options()) if chain == "tau2" else PlanningPipeline(Options())
    with pytest.raises(BrokenOutput, match=rf"^its marker records no '{key}'$"):
        getattr(pipeline, check)(ctx_for(tmp_path), result)


@pytest.mark.parametrize(
    ("preset", "steps", "checkpoint", "error"),
    [
        ("tiny", 2, None, None),  # tiny_grpo.yaml: save_strategy "no", so no checkpoint to check
        ("tiny", 0, None, "has no logged GRPO step"),
        ("full", 2, "good", None),  # grpo.yaml saves: ms-swift saves the last step
        ("full", 2, None, "its marker records no 'checkpoint'"),
        ("full", 2, "gone", r"checkpoint .* is missing"),
        ("full", 2, "torn", "does not load"),
        ("full", 0, "good", "has no logged GRPO step"),
    ],
)
def test_the_planning_grpo_check(
    built: Path, tmp_path: Path, preset: str, steps: int, checkpoint: str | None, error: str | None
) -> None:
    result: dict[str, Any] = {"run_dir": str(grpo_run(tmp_path / "grpo", steps))}
    if checkpoint is not None:
        ckpt = tmp_path / "grpo" / "checkpoint-2"
        if checkpoint != "gone":
            shutil.copytree(built / "tiny-model", ckpt)
        if checkpoint == "torn":
            (ckpt / "model.safetensors").write_bytes(b"\0" * 16)
        result["checkpoint"] = str(ckpt)
    pipeline = PlanningPipeline(Options(preset=preset, model=None if preset == "tiny" else "base"))
    if error is None:
        pipeline.check_grpo(ctx_for(tmp_path), result)
    else:
        with pytest.raises(BrokenOutput, match=error):
            pipeline.check_grpo(ctx_for(tmp_path), result)


@pytest.mark.parametrize(
    ("recipe", "saves"),
    [("planning/tiny_grpo.yaml", False), ("planning/grpo.yaml", True), ("tau2/tiny_grpo.yaml", True),
     ("tau2/grpo_multiturn.yaml", True), ("tau2/tiny_multiturn.yaml", False)],
)  # fmt: skip
def test_whether_a_grpo_recipe_saves_is_read_from_the_recipe(recipe: str, saves: bool) -> None:
    assert recipe_saves(recipe_path(recipe)) is saves


class FakeSwift(Context):
    """Runs no command: records it and leaves what `swift rlhf` would (a run dir, and a checkpoint if asked)."""

    def __init__(self, workdir: Path, saves: bool) -> None:
        super().__init__(workdir=workdir, echo=io.StringIO())
        self.saves, self.commands = saves, []

    def run(self, stage: str, cmd, extra_env=None) -> None:  # type: ignore[override]
        self.commands.append((stage, list(cmd), dict(extra_env or {})))
        out = Path(cmd[cmd.index("--output_dir") + 1])
        run = grpo_run(out, 2)
        if self.saves:  # ms-swift saves into the run directory
            shutil.copytree(self.workdir / "sft-ckpt", run / "checkpoint-2")


@pytest.mark.parametrize(
    ("chain", "stage", "model", "plugins", "config"),
    [
        ("planning", "grpo", "sft", ["rewards"], "planning/tiny_reward_config.yaml"),
        ("planning", "grpo_base", "base", ["rewards"], "planning/tiny_reward_config.yaml"),
        ("planning", "grpo_control", "sft", ["rewards"], "planning/tiny_reward_config.yaml"),
        ("tau2", "grpo", "sft", ["rewards", "tau2_user.py"], "tau2/tiny_config.yaml"),
        ("tau2", "grpo_control", "sft", ["rewards", "tau2_user.py"], "tau2/tiny_config.yaml"),
    ],
)
def test_both_chains_launch_grpo_alike_and_check_what_it_left(
    built: Path, tmp_path: Path, chain: str, stage: str, model: str, plugins: list[str], config: str
) -> None:
    pipeline = Tau2Pipeline(Tau2Options(grpo_steps=3)) if chain == "tau2" else PlanningPipeline(Options(grpo_steps=3))
    shutil.copytree(built / "tiny-model", tmp_path / "sft-ckpt")
    ctx = FakeSwift(tmp_path, saves=pipeline.grpo_saves())
    ctx.results = {"model": {"path": "BASE"}, "sft": {"checkpoint": "SFT"}}
    result = getattr(pipeline, stage)(ctx)
    pipeline.check_grpo(ctx, result)
    assert ("checkpoint" in result) is (chain == "tau2")  # the tiny planning GRPO recipe saves nothing
    [(ran, cmd, env)] = ctx.commands
    assert ran == stage and cmd[1:3] == ["rlhf", str(recipe_path(pipeline.preset.grpo))]
    assert cmd[cmd.index("--model") + 1] == {"sft": "SFT", "base": "BASE"}[model]
    assert cmd[cmd.index("--output_dir") + 1] == str(tmp_path / stage)
    assert cmd[cmd.index("--max_steps") + 1] == cmd[cmd.index("--save_steps") + 1] == "3"
    assert cmd[cmd.index("--log_completions") + 1] == "true"
    loaded = cmd[cmd.index("--external_plugins") + 1 : cmd.index("--external_plugins") + 1 + len(plugins)]
    assert [Path(p).parent.name if p.endswith("__init__.py") else Path(p).name for p in loaded] == plugins
    assert cmd[cmd.index("--external_plugins") + 1 + len(plugins)].startswith("--")  # and no other plugin
    assert cmd[-2:] == ["--learning_rate", "1e-12"] if stage == "grpo_control" else "--learning_rate" not in cmd
    assert env == {"REWARDKIT_CONFIG": str(recipe_path(config))}
