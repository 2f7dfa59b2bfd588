"""``rewardkit lint RECIPE.yaml --dataset FILE``: the bundled reward sets pass; weak ones fail, naming the probe.

Rows come from the bundled builders, as `rewardkit build planning-grpo` and `build tau2-grpo` write them: the
planning gold is formed from each row's `solution`, the tau2 gold trajectory from the task's gold actions.
Run in this process through ``rewardkit.cli.main``; the probes are rewardkit.testing's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _retail_gold import rows_of

from rewardkit.lint.gold import with_gold
from rewardkit.recipes import EXAMPLES, recipe_path
from rewardkit.rewards.answers import load_schema
from rewardkit.rewards.sets import SETS
from rewardkit.testing.content import all_probes


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def planning_rows() -> list[dict]:
    from rewardkit.data_builders import InputSpec
    from rewardkit.data_builders.planning.grpo import GrpoOptions, build_grpo

    rows, _ = build_grpo([InputSpec(EXAMPLES / "annotated_p1.jsonl", None)], GrpoOptions())
    assert len(rows) == 160
    return rows


@pytest.fixture(scope="module")
def tau2_rows() -> list[dict]:
    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo

    rows, _ = build_tau2_grpo(Tau2Options(domain="retail", split="train"))
    assert [json.loads(r["task"])["id"] for r in rows] == rows_of("train")  # the train tasks the rewards score
    return rows


def lint(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    from rewardkit.cli import main

    report = tmp_path / "lint.json"
    capsys.readouterr()
    code = main(["lint", *args, "--json", str(report)])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, json.loads(report.read_text(encoding="utf-8")), out


@pytest.mark.parametrize(
    ("recipe", "data", "gold", "config"),
    [
        ("planning/tiny_grpo.yaml", "planning", "solution", "tiny_reward_config.yaml"),
        ("planning/grpo.yaml", "planning", "solution", "reward_config.yaml"),
        ("agent/rewards.yaml", "tau2", "gold actions", None),
        ("agent/tiny_grpo.yaml", "tau2", "gold actions", "tiny_config.yaml"),
    ],
)
def test_the_bundled_sets_pass(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    recipe: str,
    data: str,
    gold: str,
    config: str | None,
) -> None:
    rows = request.getfixturevalue(f"{data}_rows")
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    code, report, out = lint(capsys, tmp_path, str(recipe_path(recipe)), "--dataset", str(dataset))
    assert code == 0, [c for c in report["checks"] if not c["passed"]]
    assert report["passed"] and report["gold"] == gold and report["rows"] == len(rows)
    assert (report["config"] or "").endswith(config or "") and (config is None) == (report["config"] is None)
    for key, r in report["rewards"].items():
        assert r["error_rate"] == 0 and r["nan_rate"] == 0, key
        if r["weight"] > 0:  # the gold scores (nearly) full marks on every trained reward
            assert r["gold_mean"] > 0.99, (key, r["gold_mean"])
    assert report["probes"] and not any(p["flagged"] for p in report["probes"].values())
    assert "all" in out and "checks passed" in out


def test_the_do_nothing_probe_is_judged_row_by_row_on_the_tiny_presets_rows(
    tau2_rows: list[dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The tiny preset trains on the train tasks with at most one gold action: 24, 50, 73, ... Before, 50 (a transfer)
    # and 57 (no action: now refused, no_evidence) paid a polite refusal with no call the gold's 1.0; judged by the
    # mean over the 14 rows (a gap of 12/14) the probe passed, judged row by row it fails on those two.
    from rewardkit.pipelines.agent import AgentPipeline, Options

    tiny = set(AgentPipeline(Options()).train_tasks())
    rows = [r for r in tau2_rows if json.loads(r["task"])["id"] in tiny]
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    _, report, _ = lint(capsys, tmp_path, str(recipe_path("agent/tiny_grpo.yaml")), "--dataset", str(dataset))
    probe = report["probes"]["do_nothing"]
    assert (probe["rows"], probe["not_below_gold"], probe["flagged"]) == (len(rows), 0, False), probe
    assert "50" in tiny and next(c for c in report["checks"] if c["name"] == "probe:do_nothing")["passed"]


CONTENT = ("other_gold", "constant", "swapped_expert", "exchanged_experts", "dropped_step", "unrewritten")
PLANNER = list(SETS["planner"].keys)  # strict_format, json_valid, think_length, think_quality, rewrite_similarity,
# expert_match, plan_coverage


@pytest.mark.parametrize(
    ("data", "keys", "weights", "config", "flagged", "reward", "strong"),
    [
        # Planning, format-heavy weights: tags_only (the gold's tags, nothing inside) and repeated (the gold three
        # times) keep strict_format = 1 and get json_valid = 0, so each scores 0.95 * 1 + 0.05 * 0 = 0.95 against the
        # gold's 1.0: a gap of 0.05, under the margin 0.1 * (0.95 + 0.05) = 0.1. Every content probe is well formed,
        # so it scores the gold's 1.0: a form-only set lets all of them through. The bundled planner set passes
        # (test_the_bundled_sets_pass).
        (
            "planning",
            ["strict_format", "json_valid"],
            ["0.95", "0.05"],
            None,
            ("tags_only", "repeated", *CONTENT),
            "strict_format",
            None,
        ),
        # The planner's seven rewards with every weight 0 but json_valid's 1: every form probe breaks the JSON and
        # scores 0, but every content probe is valid JSON and scores the gold's 1.0 (gap 0). json_valid lets them
        # through; with the planner's own weights they are caught.
        (
            "planning",
            PLANNER,
            ["0", "1", "0", "0", "0", "0", "0"],
            None,
            CONTENT,
            "json_valid",
            (PLANNER, ["0.1", "0.1", "0.1", "0.1", "0.2", "0.3", "0.1"], None),
        ),
        # tau2 with MUA-RL's rule (task_completion.require_outputs: false): every_write (the gold's calls, then
        # every write tool on the gold's arguments, which the database refuses) leaves the gold state, so it scores
        # 1.0 on most rows and nothing makes the agent say what it must; tau2's rule (the default) pays 0 for it.
        (
            "tau2",
            ["task_completion"],
            ["1"],
            "task_completion:\n  require_outputs: false\n",
            ("every_write",),
            "task_completion",
            (["task_completion"], ["1"], "task_completion:\n  require_outputs: true\n"),
        ),
    ],
    ids=["planning-format-heavy", "planning-json-valid-only", "tau2-mua-rl-rule"],
)
def test_a_weak_set_fails_naming_the_probe_and_the_reward(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    data: str,
    keys: list[str],
    weights: list[str],
    config: str | None,
    flagged: tuple[str, ...],
    reward: str,
    strong: tuple[list[str], list[str], str | None] | None,
) -> None:
    rows = request.getfixturevalue(f"{data}_rows")[:20]
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)

    def run(keys: list[str], weights: list[str], config: str | None) -> tuple[int, dict, str]:
        recipe = tmp_path / "set.yaml"
        recipe.write_text(f"reward_funcs: {json.dumps(keys)}\nreward_weights: {json.dumps(weights)}\n")
        extra = []
        if config is not None:
            (tmp_path / "config.yaml").write_text(config)
            extra = ["--config", str(tmp_path / "config.yaml")]
        return lint(capsys, tmp_path, str(recipe), "--dataset", str(dataset), *extra)

    code, report, out = run(keys, weights, config)
    assert code == 1
    failed = [c for c in report["checks"] if not c["passed"]]
    assert sorted(c["name"] for c in failed) == sorted(f"probe:{p}" for p in flagged), failed
    for check in failed:
        probe = check["name"].removeprefix("probe:")
        assert reward in check["detail"] and reward in report["probes"][probe]["let_through_by"]
        assert probe in out
    assert "FAIL" in out
    if strong is not None:  # the same rows with the strong setting pass
        code, report, _ = run(*strong)
        assert code == 0 and not any(report["probes"][p]["flagged"] for p in flagged)


def test_a_reward_that_raises_is_an_error_rate_not_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planning_rows: list[dict]
) -> None:
    rows = [dict(r) for r in planning_rows[:3]]
    gold_expert = json.loads(rows[1]["solution"])["plan"][0]["专家"]
    rows[1]["experts"] = [e for e in rows[1]["experts"] if e != gold_expert]  # the gold names an expert not offered
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    code, report, out = lint(capsys, tmp_path, str(recipe_path("planning/tiny_grpo.yaml")), "--dataset", str(dataset))
    assert code == 1
    # Every sample of row 2 (its gold and each of its probes) raises GoldError in the rewards that check the gold;
    # the others never read the experts and score every sample. Row i has 1 + len(probes[i]) samples.
    golds, _ = with_gold(rows, tool_use=False, schema=load_schema("zh"), where="rows")
    probes = all_probes(golds, tool_use=False)
    share = (1 + len(probes[1])) / sum(1 + len(p) for p in probes)
    raising = {"rewrite_similarity", "expert_match", "plan_coverage"}
    for key, r in report["rewards"].items():
        assert r["error_rate"] == pytest.approx(share if key in raising else 0), key
    failed = {c["name"] for c in report["checks"] if not c["passed"]}
    assert failed == {f"errors:{k}" for k in raising}
    assert "row 2 gold: GoldError" in report["rewards"]["expert_match"]["first_error"]
    # The run went on: every probe was still scored and compared.
    assert set(report["probes"]) == {name for p in probes for name in p}
    assert f"{share:.1%}" in out


@pytest.mark.parametrize("form", ["rows", "completions_list"])
def test_zero_variance_of_sft_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str) -> None:
    samples = [json.loads(line) for line in (EXAMPLES / "completions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(samples) == 10  # ten completions of one prompt (the README's demo table)
    if form == "completions_list":
        sft = [
            {
                "solution": samples[0]["solution"],
                "experts": samples[0]["experts"],
                "completions": [s["completion"] for s in samples],
            }
        ]
    else:
        sft = samples  # one row per completion, grouped by every column but completion and name
    dataset = write_jsonl(tmp_path / "rows.jsonl", samples[:1])  # the "perfect" completion is the gold
    sft_file = write_jsonl(tmp_path / "sft.jsonl", sft)
    recipe = str(recipe_path("planning/tiny_grpo.yaml"))  # num_generations: 8
    args = [recipe, "--dataset", str(dataset), "--sft", str(sft_file), "--max-zero-variance", "0.4"]
    code, report, _ = lint(capsys, tmp_path, *args)
    zv = report["zero_variance"]
    # 10 samples in groups of 8: [1..8] and [9, 10]. The first varies (0.737-ish mix of scores); the last two
    # ("broken JSON", "two answer blocks") both score 0.300 with the same per-reward scores: 1 of 2 groups is flat.
    assert (zv["groups"], zv["samples"]) == (2, 10)
    assert zv["weighted"] == 0.5
    # json_valid is 1 on each of the first eight and 0 on the last two: flat in both groups.
    assert zv["per_reward"]["json_valid"] == 1.0 and zv["per_reward"]["expert_match"] == 0.5
    assert code == 1 and [c["name"] for c in report["checks"] if not c["passed"]] == ["zero_variance"]
    corr = report["correlation"]  # over the 10 SFT samples
    assert corr["samples"] == 10 and corr["keys"][0] == "strict_format"
    i, j = corr["keys"].index("rewrite_similarity"), corr["keys"].index("json_valid")
    assert corr["matrix"][i][i] == 1.0 and -1.0 <= corr["matrix"][i][j] <= 1.0


def fails(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``rewardkit lint ARGS``'s one stderr line, the run a usage error (exit 2)."""
    from rewardkit.cli import main

    capsys.readouterr()
    try:
        code = main(["lint", *args])
    except SystemExit as exc:  # a flag argparse refuses: one line, exit 2, before the command runs
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize(
    ("generations", "flags", "sft", "message"),
    [
        (0, [], None, "{recipe}: num_generations must be an integer greater than 1 for GRPO; got 0"),
        (-3, [], None, "{recipe}: num_generations must be an integer greater than 1 for GRPO; got -3"),
        ("many", [], None, "{recipe}: num_generations must be an integer greater than 1 for GRPO; got 'many'"),
        (8, ["--max-zero-variance", "0.4"], None, "--max-zero-variance needs --sft"),
        (8, ["--group-by", "solution"], None, "--group-by needs --sft"),
        (8, ["--max-zero-variance", "1.5"], 2, "--max-zero-variance: '1.5' is not a finite number in [0, 1]"),
        (8, ["--max-zero-variance", "-0.1"], 2, "--max-zero-variance: '-0.1' is not a finite number in [0, 1]"),
        # One sample of one prompt: no group of two to compare.
        (
            8,
            [],
            1,
            "--sft {sft}: no prompt has 2 or more samples (grouped by every column but the completion); "
            "pass --group-by COLUMN",
        ),
        # Two samples, each its own prompt by --group-by name: still no group.
        (8, ["--group-by", "name"], 2, "--sft {sft}: no prompt has 2 or more samples (grouped by --group-by name)"),
        (8, [], 0, "--sft {sft}: no rows (the file is empty)"),
        (
            8,
            ["--config", "nope.yaml"],
            None,
            "--config: reward config nope.yaml not found (from {cwd}, tried "
            "nope.yaml, {tmp}/nope.yaml, {tmp.parent}/nope.yaml, ",
        ),  # every folder above the recipe's, in order
        (8, ["--dataset", "{tmp}/missing.jsonl"], None, "--dataset {tmp}/missing.jsonl not found"),  # the last wins
    ],
    ids=[
        "generations-0",
        "generations-negative",
        "generations-text",
        "zero-variance-no-sft",
        "group-by-no-sft",
        "share-above-1",
        "share-below-0",
        "sft-one-sample",
        "sft-no-group",
        "sft-empty",
        "config-missing",
        "dataset-missing",
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    generations: object,
    flags: list[str],
    sft: int | None,
    message: str,
) -> None:
    samples = [json.loads(line) for line in (EXAMPLES / "completions.jsonl").read_text(encoding="utf-8").splitlines()]
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"reward_funcs: [strict_format]\nnum_generations: {generations}\n", encoding="utf-8")
    args = [str(recipe), "--dataset", str(write_jsonl(tmp_path / "rows.jsonl", samples[:1]))]
    sft_file = tmp_path / "sft.jsonl"
    if sft is not None:
        args += ["--sft", str(write_jsonl(sft_file, samples[:sft]))]
    names = {"recipe": recipe, "sft": sft_file, "tmp": tmp_path, "cwd": Path.cwd()}
    err = fails(capsys, *args, *(f.format(**names) for f in flags))
    assert message.format(**names) in err, err


def test_correlation_without_sft_covers_the_golds_and_every_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planning_rows: list[dict]
) -> None:
    rows = planning_rows[:20]
    _, report, _ = lint(
        capsys,
        tmp_path,
        str(recipe_path("planning/grpo.yaml")),
        "--dataset",
        str(write_jsonl(tmp_path / "rows.jsonl", rows)),
    )
    golds, _ = with_gold(rows, tool_use=False, schema=load_schema("zh"), where="rows")
    probes = all_probes(golds, tool_use=False)
    corr = report["correlation"]
    assert corr["samples"] == len(rows) + sum(map(len, probes))  # every sample scored without an error
    at = corr["keys"].index
    # With form probes only, every probe failed on form and content together, so json_valid looked like a
    # content reward (1.00 against them). The content probes are valid JSON with the wrong content: apart.
    for content in ("expert_match", "plan_coverage", "rewrite_similarity"):
        assert corr["matrix"][at("json_valid")][at(content)] < 0.9, (content, corr["matrix"])
