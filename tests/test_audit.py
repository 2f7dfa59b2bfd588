"""The GRPO audit and its re-weighting planner on hand-made run folders, with the arithmetic in comments."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rewardkit.runs.training.audit import AuditError, load_run, reweigh, step_figures

N = None  # a reward that returned None (logged as null)


def write_run(
    folder: Path, weights: list[str], steps: list[dict[str, list]], funcs=("json_valid", "expert_match"), size: int = 2
) -> Path:
    """A run folder as ms-swift writes it: args.json and one completions.jsonl table per logged step."""
    folder.mkdir(parents=True, exist_ok=True)
    args = {"reward_funcs": list(funcs), "reward_weights": weights, "num_generations": size}
    (folder / "args.json").write_text(json.dumps(args), encoding="utf-8")
    lines = []
    for k, columns in enumerate(steps, 1):
        n = len(next(iter(columns.values())))
        lines.append(json.dumps({"step": [str(k)] * n, "prompt": ["p"] * n, "completion": ["c"] * n, **columns}))
    (folder / "completions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


# Three groups of two, JsonValid (weight 1) and ExpertMatch (weight 0.5):
#   g0: JsonValid [1, 0], ExpertMatch [1, 1]   -> totals [1.5, 0.5]: variance 0.25, all of it JsonValid's
#   g1: JsonValid [1, 1], ExpertMatch [1, 1]   -> totals [1.5, 1.5]: no variance, all correct (1 + 0.5 = 1.5)
#   g2: JsonValid [0, 0], ExpertMatch [None, 0] -> totals [0, 0] (nansum): no variance, all wrong
STEP = {"JsonValid": [1, 0, 1, 1, 0, 0], "ExpertMatch": [1, 1, 1, 1, N, 0]}


def test_group_shares_and_per_reward_figures(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "run", ["1", "0.5"], [STEP]))
    got = step_figures(run.steps[0], run.weights, run.group_size, run.names)
    assert (got["step"], got["groups"]) == (1, 3)
    assert (got["zero_variance"], got["all_correct"], got["all_wrong"]) == pytest.approx((2 / 3, 1 / 3, 1 / 3))
    json_valid, expert = got["rewards"]["JsonValid"], got["rewards"]["ExpertMatch"]
    # JsonValid: mean 3/6, std 0.5; flat in g1 and g2; it carries all of g0's variance.
    assert (json_valid["mean"], json_valid["std"], json_valid["zero_variance"]) == pytest.approx((0.5, 0.5, 2 / 3))
    assert json_valid["variance_share"] == pytest.approx(1.0)
    # ExpertMatch: 4 of the 5 scores are 1 (mean 0.8, std sqrt((4 * 0.2^2 + 0.8^2) / 5) = 0.4), flat everywhere.
    assert (expert["mean"], expert["std"], expert["zero_variance"]) == pytest.approx((0.8, 0.4, 1.0))
    assert (expert["none_rate"], expert["variance_share"]) == pytest.approx((1 / 6, 0.0))


def test_correlated_rewards_share_the_variance_by_covariance(tmp_path: Path) -> None:
    # One group: both rewards [1, 0], weights 1 and 0.5: totals [1.5, 0], variance 0.5625. Each variance and the
    # covariance is 0.25: JsonValid 1 * (1 * 0.25 + 0.5 * 0.25) = 0.375 -> 2/3; ExpertMatch 0.5 * 0.375 -> 1/3.
    run = load_run(write_run(tmp_path / "run", ["1", "0.5"], [{"JsonValid": [1, 0], "ExpertMatch": [1, 0]}]))
    got = step_figures(run.steps[0], run.weights, run.group_size, run.names)["rewards"]
    assert (got["JsonValid"]["variance_share"], got["ExpertMatch"]["variance_share"]) == pytest.approx((2 / 3, 1 / 3))


@pytest.mark.parametrize(
    ("weights", "normalize", "expected"),
    [
        # ExpertMatch alone: g0 [1.5, 0.5] -> [1, 1] is a tie, so its one pair flips and it loses its variance;
        # g1 stays flat; g2 stays [0, 0].
        ([0.0, 1.0], False, {"rankings_flipped": 1, "pairs_flipped": 1, "gain_variance": 0, "lose_variance": 1}),
        # The same weights: nothing changes.
        ([1.0, 0.5], False, {"rankings_flipped": 0, "pairs_flipped": 0, "gain_variance": 0, "lose_variance": 0}),
        # GDPO: g0's JsonValid [1, 0] -> [1, -1], ExpertMatch flat -> 0: totals [1, -1], the same order; the flat
        # groups stay flat (a constant reward normalises to 0).
        (None, True, {"rankings_flipped": 0, "pairs_flipped": 0, "gain_variance": 0, "lose_variance": 0}),
    ],
    ids=["expert-only", "same", "gdpo"],
)
def test_reweighing_counts_flips_and_variance(tmp_path: Path, weights, normalize: bool, expected: dict) -> None:
    run = load_run(write_run(tmp_path / "run", ["1", "0.5"], [STEP]))
    got = reweigh(run, None if weights is None else np.array(weights), normalize)
    assert got == {"groups": 3, **expected}


def test_a_group_flat_under_one_weighting_gains_variance_under_another(tmp_path: Path) -> None:
    # JsonValid [1, 1] (weight 1), ExpertMatch [1, 0] (weight 0): totals [1, 1]; at weights (1, 1): [2, 1].
    run = load_run(write_run(tmp_path / "run", ["1", "0"], [{"JsonValid": [1, 1], "ExpertMatch": [1, 0]}]))
    assert reweigh(run, np.array([1.0, 1.0])) == {
        "groups": 1,
        "rankings_flipped": 1,
        "pairs_flipped": 1,
        "gain_variance": 1,
        "lose_variance": 0,
    }
    # GDPO: ExpertMatch [1, 0] -> [1, -1] at weight 0 still adds nothing; JsonValid is flat: [0, 0], still flat.
    assert reweigh(run, normalize=True)["gain_variance"] == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("no-args", "no run (args.json beside logging.jsonl) here or below"),
        ("no-completions", "rerun with --log_completions true"),
        ("missing-column", "no column ['ExpertMatch']"),
        ("ragged", "5 completions do not make groups of num_generations=2"),
    ],
)
def test_what_cannot_be_audited_is_named(tmp_path: Path, change: str, message: str) -> None:
    folder = write_run(tmp_path / "run", ["1", "0.5"], [STEP])
    if change == "no-args":
        (folder / "args.json").unlink()
    elif change == "no-completions":
        (folder / "completions.jsonl").unlink()
    elif change == "missing-column":
        write_run(folder, ["1", "0.5"], [{"JsonValid": [1, 0]}])
    else:
        write_run(folder, ["1", "0.5"], [{k: v[:5] for k, v in STEP.items()}])
    with pytest.raises(AuditError, match=re.escape(message)):
        load_run(folder)


def test_the_command_writes_the_summary_the_dashboard_and_the_plan(tmp_path: Path, capsys) -> None:
    from rewardkit.cli import main

    # Step 2: JsonValid always 1, ExpertMatch [1, 0] in every group: every group varies, all of it ExpertMatch's.
    second = {"JsonValid": [1] * 6, "ExpertMatch": [1, 0] * 3}
    folder = write_run(tmp_path / "run", ["1", "0.5"], [STEP, second])
    report = tmp_path / "audit.json"
    assert main(["audit", str(folder), "--weights", "0,1", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    figures = json.loads(report.read_text(encoding="utf-8"))
    assert [s["zero_variance"] for s in figures["steps"]] == pytest.approx([2 / 3, 0.0])
    assert figures["steps"][1]["rewards"]["ExpertMatch"]["variance_share"] == pytest.approx(1.0)
    # Flags at the step each starts: step 1's 2/3 flat groups (>= 0.4), and JsonValid's 100% share of step 1.
    assert [(f["flag"], f["step"]) for f in figures["flags"]] == [("no_gradient", 1), ("one_reward_drives", 1)]
    # The plan: ExpertMatch alone flips g0 of step 1 (a tie now) and nothing in step 2 (same order, [1, 0]).
    assert figures["plan"] == {
        "weights": [0.0, 1.0],
        "normalize": False,
        "groups": 6,
        "rankings_flipped": 1,
        "pairs_flipped": 1,
        "gain_variance": 0,
        "lose_variance": 1,
    }
    assert "1 of 6 group rankings flip" in out and "| 2 | 3 | 0.00 | 0.00 | 0.00 |" in out
    assert (folder / "audit" / "audit.md").read_text(encoding="utf-8") in out
    assert (folder / "audit" / "audit.png").read_bytes()[:4] == b"\x89PNG"


def test_weights_must_match_the_rewards(tmp_path: Path, capsys) -> None:
    from rewardkit.cli import main

    folder = write_run(tmp_path / "run", ["1", "0.5"], [STEP])
    assert main(["audit", str(folder), "--weights", "1,2,3"]) == 2
    assert "--weights: 3 weights for the run's 2 rewards" in capsys.readouterr().err


def test_the_live_diagnostics_episodes_join_their_steps(tmp_path: Path) -> None:
    from rewardkit.runs.training.audit_report import audit

    folder = write_run(tmp_path / "run", ["1", "0.5"], [STEP, STEP])
    tools = {"get_order": {"calls": 6, "errors": 1}}
    rollouts = [  # step 1: 6 calls over 3 episodes (2 each); step 2: 3 calls, 1 each: half, so the tools are skipped
        {
            "step": 1,
            "episodes": 3,
            "terminations": {"user_stop": 3},
            "excluded": 0,
            "turns": [2, 2, 2],
            "tools": tools,
            "tool_errors": 1,
            "policy_tokens": {"mean": 50.0, "max": 60},
        },
        {
            "step": 2,
            "episodes": 3,
            "terminations": {"max_turns": 2, "user_sim_error": 1},
            "excluded": 1,
            "user_flagged": 1,
            "turns": [5, 5, 1],
            "tools": {"get_order": {"calls": 3, "errors": 0}},
            "tool_errors": 0,
            "policy_tokens": {"mean": 90.0, "max": 120},
        },
    ]
    (folder / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts), encoding="utf-8")
    report = audit(load_run(folder))
    assert report["steps"][0]["episodes"]["tools"] == tools and report["steps"][1]["episodes"]["excluded"] == 1
    found = {(f["flag"], f["step"]) for f in report["flags"]}
    # 2 of 3 episodes ran out of turns at step 2 (>= 0.5); 1 call per episode against 2 at step 1 (<= half).
    assert {("max_turns", 2), ("tools_skipped", 2)} <= found
    from rewardkit.runs.training.audit_report import markdown

    rows = [line for line in markdown(report).splitlines() if line.startswith(("| 1 | 3 |", "| 2 | 3 |"))]
    assert rows[-2:] == [  # step 1's summary is from before the user review: no flagged count, shown as "-"
        "| 1 | 3 | 0 | - | 6 | 1 | user_stop 3 |",
        "| 2 | 3 | 1 | 1 | 3 | 0 | max_turns 2, user_sim_error 1 |",
    ]


def test_the_rollouts_summary_example_holds() -> None:
    import doctest

    import rewardkit.loop.rollouts

    result = doctest.testmod(rewardkit.loop.rollouts)
    assert (result.attempted, result.failed) == (3, 0)


def test_the_rollouts_summary_counts_the_user_reviews_flags() -> None:
    from rewardkit.loop.rollouts import summarize_rollouts

    flag = {"kind": "unseen_fact", "turn": 1, "evidence": "#W1"}
    infos = [
        {"termination": "user_sim_mistake", "user_flags": [flag, {**flag, "kind": "role_break"}]},  # excluded
        {"termination": "user_stop", "user_flags": [flag]},  # counted (rollout.user_review: count)
        {"termination": "user_stop"},
    ]
    summary = summarize_rollouts(infos)
    # two flagged episodes, three flags; only the user_sim_mistake one is excluded
    assert (summary["user_flagged"], summary["user_flags"], summary["excluded"]) == (
        2,
        {"unseen_fact": 2, "role_break": 1},
        1,
    )


# (the first reward's scores or None, what the summary says of a simulator's labelled mistakes)
LABELLED = [
    # four episodes, three with a mistake: one excluded by the review, two left in (one scored 0, one 1)
    ([0.0, 1.0, None, 0.0], {"made": {"role_break": 2, "unseen_fact": 1}, "trained": 2, "trained_zero": 1}),
    (None, {"made": {"role_break": 2, "unseen_fact": 1}, "trained": 2, "trained_zero": None}),  # no scores given
]


@pytest.mark.parametrize(("scores", "expected"), LABELLED)
def test_the_rollouts_summary_counts_a_faulty_simulators_mistakes_left_in_training(
    scores: list[float | None] | None, expected: dict[str, object]
) -> None:
    from rewardkit.loop.rollouts import summarize_rollouts

    infos = [
        {"termination": "user_stop", "user_sim_fault": "role_break"},  # missed by the review: trained, scored 0
        {"termination": "user_stop", "user_sim_fault": "unseen_fact"},  # trained, scored 1: not wrongly zero
        {"termination": "user_sim_mistake", "user_sim_fault": "role_break"},  # flagged and excluded
        {"termination": "user_stop"},  # an honest episode scored 0: the agent's own failure
    ]
    assert summarize_rollouts(infos, scores)["user_sim_faults"] == expected


def test_the_rollouts_summary_says_nothing_of_faults_where_the_simulator_made_none() -> None:
    from rewardkit.loop.rollouts import summarize_rollouts

    assert "user_sim_faults" not in summarize_rollouts([{"termination": "user_stop"}], [0.0])
