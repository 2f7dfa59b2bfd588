"""A stage is marked done only once its outputs check out, and a rerun redoes a stage whose output broke.

Also: the tiny model's tokenizer corpus ships with the package, so `rewardkit tiny-model OUT` gives the same
vocabulary from any directory, and an empty corpus is an error instead of a 261-token model.
Only the cheap stages (model, build) run for real here; SFT and GRPO are e2e tests.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from rewardkit.pipelines.chain import recipe_saves
from rewardkit.pipelines.planning import TINY_MODEL, CorpusError, Options, PlanningPipeline, planning_corpus
from rewardkit.pipelines.stages import BrokenOutput, Context, PipelineError, Stage, StageError, run_stages
from rewardkit.pipelines.tau2 import Options as Tau2Options
from rewardkit.pipelines.tau2 import Tau2Pipeline
from rewardkit.recipes import EXAMPLES, recipe_path

CHECKOUT_EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "planning"


def ctx_for(workdir: Path) -> Context:
    return Context(workdir=workdir, echo=io.StringIO())


def file_stage(name: str, runs: list[str], content: str = "ok") -> Stage:
    """A stage that writes ``<name>.txt``; its check wants the file to hold ``ok``."""

    def run(ctx: Context) -> dict[str, Any]:
        runs.append(name)
        (ctx.workdir / f"{name}.txt").write_text(content)
        return {"file": str(ctx.workdir / f"{name}.txt")}

    def check(ctx: Context, result: Mapping[str, Any]) -> None:
        path = Path(result["file"])
        if not path.is_file() or path.read_text() != "ok":
            raise BrokenOutput(f"{path} is not ok")

    return Stage(name, run, check)


# -- the runner --------------------------------------------------------------------------------------------------
def test_a_stage_whose_output_fails_its_check_is_not_marked(tmp_path: Path) -> None:
    runs: list[str] = []
    with pytest.raises(StageError, match=r"stage 'b' finished but its output is broken: .*b\.txt is not ok"):
        run_stages([file_stage("a", runs), file_stage("b", runs, "torn"), file_stage("c", runs)], ctx_for(tmp_path))
    assert runs == ["a", "b"]
    assert sorted(p.name for p in (tmp_path / ".stages").iterdir()) == ["a.json"]
    # Fixed, a rerun keeps a and redoes b and c.
    run_stages([file_stage("a", runs), file_stage("b", runs), file_stage("c", runs)], ctx_for(tmp_path))
    assert runs == ["a", "b", "b", "c"]


@pytest.mark.parametrize("broken", ["a", "b", "c"])
def test_a_broken_output_is_redone_with_every_stage_after_it(tmp_path: Path, broken: str) -> None:
    runs: list[str] = []
    stages = [file_stage(name, runs) for name in "abc"]
    run_stages(stages, ctx_for(tmp_path))
    (tmp_path / f"{broken}.txt").write_text("tor")  # e.g. a disk filled up after the marker was written
    runs.clear()
    ctx = ctx_for(tmp_path)
    run_stages(stages, ctx)
    assert runs == list("abc")[list("abc").index(broken) :]
    assert f"[{broken}] earlier output is broken" in ctx.echo.getvalue()


def test_a_deleted_output_is_redone(tmp_path: Path) -> None:
    runs: list[str] = []
    stages = [file_stage(name, runs) for name in "ab"]
    run_stages(stages, ctx_for(tmp_path))
    (tmp_path / "a.txt").unlink()
    runs.clear()
    run_stages(stages, ctx_for(tmp_path))
    assert runs == ["a", "b"]


@pytest.mark.parametrize("marker", ["{", "[]", "\udcff", ""])
def test_a_torn_marker_means_not_done(tmp_path: Path, marker: str) -> None:
    runs: list[str] = []
    stages = [file_stage(name, runs) for name in "ab"]
    run_stages(stages, ctx_for(tmp_path))
    (tmp_path / ".stages" / "a.json").write_bytes(marker.encode("utf-8", "surrogateescape"))
    runs.clear()
    run_stages(stages, ctx_for(tmp_path))
    assert runs == ["a", "b"]
    assert json.loads((tmp_path / ".stages" / "a.json").read_text())["file"].endswith("a.txt")


def test_a_missing_marker_redoes_the_stages_after_it(tmp_path: Path) -> None:
    runs: list[str] = []
    stages = [file_stage(name, runs) for name in "abc"]
    run_stages(stages, ctx_for(tmp_path))
    (tmp_path / ".stages" / "b.json").unlink()
    runs.clear()
    run_stages(stages, ctx_for(tmp_path))
    assert runs == ["b", "c"]  # c's marker predates b's new output


def test_force_an_unknown_stage_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match=r"--force: unknown stage\(s\) \['x'\]"):
        run_stages([file_stage("a", [])], ctx_for(tmp_path), ["x"])


# -- the planning pipeline's cheap stages ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workdir where the model and build stages ran once."""
    workdir = tmp_path_factory.mktemp("planning")
    run_stages(PlanningPipeline(Options()).stages()[:2], ctx_for(workdir))
    return workdir


def rerun(workdir: Path) -> str:
    ctx = ctx_for(workdir)
    stages = PlanningPipeline(Options()).stages()
    assert [s.name for s in stages[:2]] == ["model", "build"]
    run_stages(stages[:2], ctx)
    return ctx.echo.getvalue()


def test_model_and_build_markers_record_their_checks(built: Path) -> None:
    model = json.loads((built / ".stages" / "model.json").read_text())
    assert model["vocab"] == TINY_MODEL["vocab_size"]
    assert model["data"] == str(EXAMPLES.resolve())
    assert "[model] done earlier, skipped" in rerun(built)


@pytest.mark.parametrize(
    ("damage", "redone"),
    [
        (lambda w: (w / "tiny-model" / "tokenizer.json").unlink(), ["model", "build"]),
        (lambda w: (w / "tiny-model" / "model.safetensors").write_bytes(b"\0" * 16), ["model", "build"]),
        (lambda w: (w / "tiny-model" / "config.json").write_text("{"), ["model", "build"]),
        (lambda w: (w / "data" / "sft.jsonl").write_text(""), ["build"]),
        (lambda w: (w / "data" / "grpo.jsonl").write_bytes(b'{"messages": [\n'), ["build"]),
        (lambda w: (w / "data" / "test.jsonl").write_text('{"a": 1}\n'), ["build"]),  # fewer rows than built
    ],
    ids=["no-tokenizer", "torn-weights", "torn-config", "empty-sft", "torn-grpo", "short-test"],
)
def test_a_broken_planning_output_is_redone(built: Path, tmp_path: Path, damage, redone: list[str]) -> None:
    workdir = tmp_path / "w"
    shutil.copytree(built, workdir)
    for marker in (workdir / ".stages").glob("*.json"):  # the markers name the fixture's paths: repoint them
        marker.write_text(marker.read_text().replace(str(built), str(workdir)))
    damage(workdir)
    log = rerun(workdir)
    for stage in ("model", "build"):
        assert (f"[{stage}] starting" in log) == (stage in redone), log
    assert f"[{redone[0]}] earlier output is broken" in log
    assert "[build] finished" in log  # and the redone outputs pass their checks again


def test_a_pipeline_over_an_empty_data_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="teacher_"):
        PlanningPipeline(Options(data=tmp_path))


# -- the tiny model's corpus -------------------------------------------------------------------------------------
def test_an_empty_corpus_is_an_error(tmp_path: Path) -> None:
    from rewardkit.pipelines.tiny_model import build_tiny_model

    for corpus in ([], ["", "  \n"]):
        with pytest.raises(ValueError, match="empty tokenizer corpus"):
            build_tiny_model(tmp_path / "m", corpus)
    assert not (tmp_path / "m").exists()
    with pytest.raises(CorpusError, match=r"no \*\.jsonl files"):
        planning_corpus(tmp_path)


@pytest.mark.skipif(not CHECKOUT_EXAMPLES.is_dir(), reason="needs the repository's examples/planning")
def test_the_checkout_examples_are_the_shipped_files() -> None:
    shipped = sorted(p.name for p in EXAMPLES.glob("*.jsonl"))
    assert shipped == sorted(p.name for p in CHECKOUT_EXAMPLES.glob("*.jsonl"))
    for name in shipped:  # examples/planning/*.jsonl are links to the shipped files (make_examples.py writes there)
        assert (EXAMPLES / name).read_bytes() == (CHECKOUT_EXAMPLES / name).read_bytes(), name
    assert planning_corpus() == planning_corpus(CHECKOUT_EXAMPLES)


def test_tiny_model_from_an_empty_directory_has_the_full_vocabulary(tmp_path: Path, monkeypatch, capsys) -> None:
    from rewardkit.cli import main

    empty = tmp_path / "cwd"
    empty.mkdir()
    monkeypatch.chdir(empty)
    assert main(["tiny-model", "m"]) == 0
    config = json.loads((empty / "m" / "config.json").read_text())
    assert config["vocab_size"] == TINY_MODEL["vocab_size"] == 2048  # 261 (bytes + specials) from no corpus
    assert capsys.readouterr().out.strip() == "m"


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
