"""A stage is marked done only once its outputs check out, and a rerun redoes a stage whose output broke.

Also: the tiny model's tokenizer corpus ships with the package, so `rewardkit tiny-model OUT` gives the same
vocabulary from any directory, and an empty corpus is an error instead of a 261-token model.
Only the cheap stages (model, build) run for real here; SFT and GRPO are e2e tests.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import ctx_for

from rewardkit.pipelines.planning import TINY_MODEL, CorpusError, Options, PlanningPipeline, planning_corpus
from rewardkit.pipelines.stages import BrokenOutput, Context, PipelineError, Stage, StageError, run_stages
from rewardkit.recipes import EXAMPLES

CHECKOUT_EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "planning"


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


GRPO_LINE = (
    "{'rewardkit/TaskCompletion/latency_ms': '1.794', 'loss': '-3e-08', 'grad_norm': '0.3907', 'reward': '0.5625', "
    "'rewards/TaskCompletion/mean': '0.5625', 'global_step/max_steps': '1/40', 'elapsed_time': '17s', "
    "'remaining_time': '10m 45s', 'train_speed(s/it)': '16.54'}\n"
)
# (a line of a stage's output, what the console shows of it: None is nothing, the whole line stays in the log)
PROGRESS = [
    (GRPO_LINE, "step 1/40 · reward 0.5625 · 17s elapsed, 10m 45s left"),  # the diagnostics' keys first: no matter
    (
        "{'loss': '7.157', 'token_acc': '0.02083', 'global_step/max_steps': '1/80', 'elapsed_time': '1s', "
        "'remaining_time': '1m 39s'}",
        "step 1/80 · loss 7.157 · token_acc 0.02083 · 1s elapsed, 1m 39s left",  # SFT: no reward, its loss
    ),
    ("{'train_runtime': '420.1', 'train_loss': '1e-08'}", None),  # the closing summary: not a step
    ("{'global_step/max_steps': '1/40', 'loss': ", None),  # a line cut short: not shown, not an error
    ("[INFO:swift] loading the model", None),
]


@pytest.mark.parametrize(("line", "shown"), PROGRESS)
def test_a_stage_shows_each_trainer_step_as_one_line(line: str, shown: str | None) -> None:
    from rewardkit.pipelines.stages import progress_line

    assert progress_line(line) == shown
