"""Seed spread, paired-by-item comparisons over seeds, and the sign test's verdict (rewardkit.runs.stats.paired,
rewardkit.pipelines.evidence): the arithmetic the chains' summaries rest on."""

from __future__ import annotations

import pytest

from rewardkit.pipelines.chain import ChainOptions, grpo_runs
from rewardkit.pipelines.evidence import model_kinds, per_kind, sign_test
from rewardkit.runs.stats.paired import PairingError, paired_items, seed_means, spread


@pytest.mark.parametrize(
    ("values", "mean", "sd", "runs"),
    [
        ([0.5], 0.5, 0.0, 1),  # one seed: no spread
        ([0.2, 0.4, 0.6], 0.4, 0.2, 3),  # sample sd: sqrt(((-.2)^2 + 0 + .2^2) / 2) = 0.2
        ([0.3, None, float("nan"), 0.5], 0.4, 2**0.5 / 10, 2),  # None and NaN are no run; sd(0.3, 0.5) = 0.1414
    ],
)
def test_spread_over_seeds(values: list, mean: float, sd: float, runs: int) -> None:
    got = spread(values)
    assert (got["mean"], got["sd"], got["runs"]) == (pytest.approx(mean), pytest.approx(sd), runs)


def test_spread_of_nothing_is_none_not_zero() -> None:
    assert spread([None])["mean"] is None and spread([])["runs"] == 0


def test_items_are_averaged_over_the_seeds_that_have_them() -> None:
    # task a: (1 + 0) / 2 = 0.5; task b only in the second seed: 1.0
    assert seed_means([{"a": 1.0}, {"a": 0.0, "b": 1.0}]) == {"a": 0.5, "b": 1.0}


def test_paired_items_over_seeds() -> None:
    control = [{"t1": 0.0, "t2": 0.5, "t3": 1.0}, {"t1": 0.0, "t2": 0.5, "t3": 1.0}]
    grpo = [{"t1": 0.5, "t2": 0.5, "t3": 1.0}, {"t1": 1.0, "t2": 1.0, "t3": 1.0}]
    got = paired_items(control, grpo, n_boot=2000, seed=0)
    # per task: t1 0.75 - 0 = +0.75, t2 0.75 - 0.5 = +0.25, t3 0; mean +1/3
    assert got["diff"] == pytest.approx(1 / 3) and (got["up"], got["down"], got["items"]) == (2, 0, 3)
    # no difference is negative, so no resample mean is: the interval starts at 0 or above
    assert 0.0 <= got["ci"][0] <= got["diff"] <= got["ci"][1] <= 0.75 and got["seeds"] == [2, 2]


def test_paired_items_need_an_item_in_common() -> None:
    with pytest.raises(PairingError, match=r"no item in common \(1 and 1 items\)"):
        paired_items([{"a": 1.0}], [{"b": 1.0}])


def _pair(diff: float, low: float, high: float) -> dict:
    return {"diff": diff, "ci": [low, high], "items": 10, "up": 0, "down": 0}


@pytest.mark.parametrize(
    ("grpo", "inverted", "moves", "opposite", "excluded"),
    [
        (_pair(0.05, 0.01, 0.09), _pair(-0.2, -0.3, -0.1), {"grpo": "up", "inverted": "down"}, True, True),
        (_pair(0.05, -0.01, 0.09), _pair(-0.2, -0.3, -0.1), {"grpo": "up", "inverted": "down"}, True, False),
        # both up: the gradient path is broken somewhere
        (_pair(0.05, 0.01, 0.09), _pair(0.02, -0.01, 0.05), {"grpo": "up", "inverted": "up"}, False, False),
        (_pair(0.0, 0.0, 0.0), _pair(-0.2, -0.3, -0.1), {"grpo": "flat", "inverted": "down"}, False, False),
    ],
)
def test_the_sign_test(grpo: dict, inverted: dict, moves: dict, opposite: bool, excluded: bool) -> None:
    got = sign_test(grpo, inverted, "metric")
    assert (got["directions"], got["opposite"], got["both_intervals_exclude_zero"]) == (moves, opposite, excluded)


def test_each_kind_collects_its_seeds() -> None:
    kinds = model_kinds(grpo_runs(ChainOptions(seeds=2, sign_test=True)))
    assert kinds == {
        "base": "base",
        "sft": "sft",
        "grpo": "grpo",
        "grpo_control": "control",
        "grpo_inverted": "inverted",
        "grpo_s2": "grpo",
        "grpo_control_s2": "control",
        "grpo_inverted_s2": "inverted",
    }
    values = {"base": 0.0, "sft": 0.5, "grpo": 0.6, "grpo_s2": 0.8, "grpo_control": 0.5, "grpo_control_s2": 0.5}
    got = per_kind(values, kinds)  # the inverted runs have no value here: no 'inverted' entry
    assert list(got) == ["base", "sft", "grpo", "control"]
    assert got["grpo"]["mean"] == pytest.approx(0.7) and got["grpo"]["models"] == ["grpo", "grpo_s2"]
