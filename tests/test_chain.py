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

from rewardkit.pipelines.agent import AgentPipeline
from rewardkit.pipelines.agent import Options as AgentOptions
from rewardkit.pipelines.chain import read_recipe, recipe_saves
from rewardkit.pipelines.planning import Options, PlanningPipeline
from rewardkit.pipelines.stages import BrokenOutput, Context
from rewardkit.recipes import EXAMPLES, recipe_path
from rewardkit.rewards import REWARDS


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
        ("agent", "check_data", {}, "dir"),
        ("agent", "check_data", {"dir": "d", "kept": 1, "grpo_rows": 1}, "domain"),
        ("agent", "check_data", {"dir": "d", "domain": "retail", "kept": 1, "grpo_rows": 1}, "tasks"),
        ("agent", "check_model", {}, "path"),
        ("agent", "check_sft", {}, "checkpoint"),
        ("agent", "check_grpo", {"run_dir": "RUN"}, "checkpoint"),  # the tiny agent GRPO saves its last step
        ("agent", "check_eval", {"greedy_train": "d", "greedy_test": "d", "sampled_train": "d"}, "sampled_test"),
        ("agent", "check_summary", {}, "summary"),
        ("planning", "check_model", {"data": str(EXAMPLES.resolve()), "path": "MODEL"}, "vocab"),
        ("planning", "check_build", {"data": str(EXAMPLES.resolve())}, "reports"),
        ("planning", "check_sft", {}, "checkpoint"),
        ("planning", "check_grpo", {}, "run_dir"),
        ("planning", "check_grpo", {"run_dir": "RUN"}, "checkpoint"),  # every GRPO run saves: it is evaluated
        ("planning", "check_eval", {}, "scores"),
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
    pipeline = AgentPipeline(AgentOptions()) if chain == "agent" else PlanningPipeline(Options())
    with pytest.raises(BrokenOutput, match=rf"^its marker records no '{key}'$"):
        getattr(pipeline, check)(ctx_for(tmp_path), result)


@pytest.mark.parametrize(
    ("preset", "steps", "checkpoint", "error"),
    [
        ("tiny", 2, "good", None),  # tiny_grpo.yaml saves its last step, as every chain's GRPO recipe must
        ("tiny", 0, "good", "has no logged GRPO step"),
        ("tiny", 2, None, "its marker records no 'checkpoint'"),
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
    [
        ("planning/tiny_grpo.yaml", True),
        ("planning/grpo.yaml", True),
        ("agent/tiny_grpo.yaml", True),
        ("agent/grpo_multiturn.yaml", True),
        ("agent/tiny_multiturn.yaml", False),
    ],
)
def test_whether_a_grpo_recipe_saves_is_read_from_the_recipe(recipe: str, saves: bool) -> None:
    assert recipe_saves(recipe_path(recipe)) is saves


class FakeSwift(Context):
    """Runs no command: records it and leaves what `swift rlhf` would (a run dir, and a checkpoint if asked)."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir=workdir, echo=io.StringIO())
        self.commands = []

    def run(self, stage: str, cmd, extra_env=None) -> None:  # type: ignore[override]
        self.commands.append((stage, list(cmd), dict(extra_env or {})))
        out = Path(cmd[cmd.index("--output_dir") + 1])
        run = grpo_run(out, 2)  # ms-swift saves into the run directory
        shutil.copytree(self.workdir / "sft-ckpt", run / "checkpoint-2")
        # What --log_completions leaves for the audit: args.json and a table of one group of two.
        recipe = read_recipe(Path(cmd[2]))
        funcs, weights = recipe["reward_funcs"], recipe["reward_weights"]
        (run / "args.json").write_text(
            json.dumps({"reward_funcs": funcs, "reward_weights": weights, "num_generations": 2})
        )
        table = {"step": ["1", "1"], "completion": ["a", "b"], **{REWARDS[k].__name__: [1.0, 0.0] for k in funcs}}
        (run / "completions.jsonl").write_text(json.dumps(table) + "\n")


PLANNING_WEIGHTS = ["0.1", "0.1", "0.1", "0.1", "0.2", "0.3", "0.1"]  # tiny_grpo.yaml's reward_weights


@pytest.mark.parametrize(
    ("chain", "stage", "model", "seed", "extra", "plugins", "config"),
    [
        ("planning", "grpo", "sft", 42, [], ["rewards", "diagnostics.py"], "planning/tiny_reward_config.yaml"),
        ("planning", "grpo_base", "base", 42, [], ["rewards", "diagnostics.py"], "planning/tiny_reward_config.yaml"),
        (
            "planning",
            "grpo_control",
            "sft",
            42,
            ["--learning_rate", "1e-12"],
            ["rewards", "diagnostics.py"],
            "planning/tiny_reward_config.yaml",
        ),
        # the sign test: every weight negated, so each group's advantages flip sign
        (
            "planning",
            "grpo_inverted_s2",
            "sft",
            43,
            ["--reward_weights", *(f"-{w}" for w in PLANNING_WEIGHTS)],
            ["rewards", "diagnostics.py"],
            "planning/tiny_reward_config.yaml",
        ),
        ("agent", "grpo", "sft", 42, [], ["rewards", "simulated_user.py", "diagnostics.py"], "agent/tiny_config.yaml"),
        (
            "agent",
            "grpo_control_s2",
            "sft",
            43,
            ["--learning_rate", "1e-12"],
            ["rewards", "simulated_user.py", "diagnostics.py"],
            "agent/tiny_config.yaml",
        ),
        # agent: weights 1, 0, 0 -> -1, -0, -0: the advantage of 1 - TaskCompletion
        (
            "agent",
            "grpo_inverted",
            "sft",
            42,
            ["--reward_weights", "-1.0", "-0.0", "-0.0"],
            ["rewards", "simulated_user.py", "diagnostics.py"],
            "agent/tiny_config.yaml",
        ),
    ],
)
def test_both_chains_launch_grpo_alike_and_check_what_it_left(
    built: Path,
    tmp_path: Path,
    chain: str,
    stage: str,
    model: str,
    seed: int,
    extra: list[str],
    plugins: list[str],
    config: str,
) -> None:
    opts = {"grpo_steps": 3, "seeds": 2, "sign_test": True, "baseline": True}  # baseline: planning adds grpo_base
    pipeline = AgentPipeline(AgentOptions(**opts)) if chain == "agent" else PlanningPipeline(Options(**opts))
    shutil.copytree(built / "tiny-model", tmp_path / "sft-ckpt")
    ctx = FakeSwift(tmp_path)
    ctx.results = {"model": {"path": "BASE"}, "sft": {"checkpoint": "SFT"}}
    stages = {s.name: s for s in pipeline.stages()}
    result = stages[stage].run(ctx)
    pipeline.check_grpo(ctx, result)
    assert result["seed"] == seed and Path(result["checkpoint"]).name == "checkpoint-2"
    [(ran, cmd, env)] = ctx.commands
    assert ran == stage and cmd[1:3] == ["rlhf", str(recipe_path(pipeline.preset.grpo))]
    assert cmd[cmd.index("--model") + 1] == {"sft": "SFT", "base": "BASE"}[model]
    assert cmd[cmd.index("--output_dir") + 1] == str(tmp_path / stage)
    assert cmd[cmd.index("--max_steps") + 1] == cmd[cmd.index("--save_steps") + 1] == "3"
    assert cmd[cmd.index("--log_completions") + 1] == "true"
    assert cmd[cmd.index("--callbacks") + 1] == "rewardkit_diagnostics"
    assert Path(result["audit"]).read_text().startswith("# Audit of")  # each GRPO run is audited as it ends
    loaded = cmd[cmd.index("--external_plugins") + 1 : cmd.index("--external_plugins") + 1 + len(plugins)]
    assert [Path(p).parent.name if p.endswith("__init__.py") else Path(p).name for p in loaded] == plugins
    assert cmd[cmd.index("--external_plugins") + 1 + len(plugins)].startswith("--")  # and no other plugin
    assert cmd[cmd.index("--seed") + 1] == str(seed) and cmd[cmd.index("--seed") + 2 :] == extra
    if chain == "planning":
        assert env == {"REWARDKIT_CONFIG": str(recipe_path(config))}
    else:  # the preset's config plus the chain's domain, so that every process of swift rlhf finds it
        assert env == {"REWARDKIT_CONFIG": str(tmp_path / "grpo_config.yaml")}
        assert read_recipe(Path(env["REWARDKIT_CONFIG"])) == {**read_recipe(recipe_path(config)), "domain": "retail"}


@pytest.mark.parametrize(
    ("seeds", "baseline", "sign_test", "stages"),
    [
        (1, False, False, ["grpo"]),
        (1, True, False, ["grpo", "grpo_control"]),
        (1, False, True, ["grpo", "grpo_control", "grpo_inverted"]),  # the sign test needs its control
        (2, True, False, ["grpo", "grpo_control", "grpo_s2", "grpo_control_s2"]),
    ],
)
def test_the_grpo_runs_of_a_chain(seeds: int, baseline: bool, sign_test: bool, stages: list[str]) -> None:
    from rewardkit.pipelines.chain import grpo_runs

    runs = grpo_runs(Options(seeds=seeds, baseline=baseline, sign_test=sign_test))
    assert [r.stage for r in runs] == stages
    assert [r.seed for r in runs] == [42 + int(s.endswith("_s2")) for s in stages]


def test_the_data_of_another_domain_is_made_again(tmp_path: Path) -> None:
    """A workdir's data marker made on another domain is broken output: the data stage and every later one rerun."""
    marker = {"dir": str(tmp_path), "domain": "/x/library", "tasks": ["0"], "kept": 1, "grpo_rows": 1}
    with pytest.raises(BrokenOutput, match=r"^it was made on domain /x/library; this run's is retail$"):
        AgentPipeline(AgentOptions()).check_data(ctx_for(tmp_path), marker)
