"""Failed-simulator episodes are left out of GRPO: ms-swift's own advantage and collate functions, wrapped."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from swift.rl_core.advantage import compute_advantages
from swift.rl_core.data import GRPOBatch, GRPOSample
from swift.rlhf_trainers import grpo_trainer
from swift.rlhf_trainers.utils import collate_to_grpo_micro_batch

from rewardkit.plugins.exclusion import (
    advantages_excluding,
    collate_excluding,
    excluded_rows,
    install,
    is_excluded,
)

NAN = math.nan
WRAPPED = advantages_excluding(compute_advantages)
ONE = torch.tensor([1.0])


def column(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1)  # [N, 1]: one weighted reward function


def original(rewards: torch.Tensor, weights: torch.Tensor = ONE, k: int = 4, **kw: Any) -> torch.Tensor:
    return compute_advantages(rewards, weights, k, **kw)[0]


class TestAdvantages:
    @pytest.mark.parametrize(
        ("scale", "kept", "baseline"),
        [
            # kept rows [1, 0, 1]: mean 2/3, deviations [1/3, -2/3, 1/3], unbiased var (1/9 + 4/9 + 1/9) / 2 = 1/3,
            # std sqrt(1/3) = 0.57735; ms-swift divides by std + 1e-4
            ("group", [1 / 3 / 0.57745, -2 / 3 / 0.57745, 1 / 3 / 0.57745], 0.5 / 0.57745),
            # no scaling: the deviations themselves
            ("none", [1 / 3, -2 / 3, 1 / 3], 0.5),
        ],
    )
    def test_an_excluded_row_leaves_its_group_statistics(self, scale: str, kept: list[float], baseline: float) -> None:
        # group 0: [1, 0, NaN, 1] with row 2 excluded; group 1: [0, 1, 1, 1] untouched
        rewards = column(1, 0, NAN, 1, 0, 1, 1, 1)
        adv, weighted = WRAPPED(rewards, ONE, 4, scale_rewards=scale)
        assert adv[[0, 1, 3]].tolist() == pytest.approx(kept, abs=1e-4)
        assert weighted[2].item() == pytest.approx(2 / 3)  # logged as the kept mean: the group's mean stays 2/3
        assert adv[2].item() == 0.0  # exactly zero: no gradient from the failed episode
        # the kept rows get exactly what ms-swift gives a 3-row group of them
        assert torch.equal(adv[[0, 1, 3]], original(column(1, 0, 1), k=3, scale_rewards=scale))
        assert torch.equal(adv[4:], original(column(0, 1, 1, 1), scale_rewards=scale))  # other groups unchanged
        # unwrapped, NaN is summed as 0: [1, 0, 0, 1], mean 1/2, so the kept rows would move to ±baseline
        plain = original(rewards, scale_rewards=scale)
        assert plain[:4].tolist() == pytest.approx([baseline, -baseline, -baseline, baseline], abs=1e-4)
        assert not torch.allclose(plain[[0, 1, 3]], adv[[0, 1, 3]])

    @pytest.mark.parametrize(
        ("estimator", "scale"), [("rloo", "group"), ("rloo", "none"), ("reinforce_plus_plus", "group")]
    )
    def test_other_estimators_also_see_only_the_kept_rows(self, estimator: str, scale: str) -> None:
        rewards = column(1, NAN, 0, 0, 1, 0, 0, 0)
        kw = {"advantage_estimator": estimator, "scale_rewards": scale}
        adv, _ = WRAPPED(rewards, ONE, 4, **kw)
        assert torch.equal(adv[[0, 2, 3]], original(column(1, 0, 0), k=3, **kw)) and adv[1].item() == 0.0
        assert torch.equal(adv[4:], original(column(1, 0, 0, 0), **kw))

    def test_kl_in_reward_uses_the_kept_rows_kl(self) -> None:
        rewards, kl = column(1, 0, NAN, 1), torch.tensor([0.5, 0.1, 9.0, 0.2])
        kw = {"kl_in_reward": True, "beta": 0.1}
        adv, _ = WRAPPED(rewards, ONE, 4, kl_values=kl, **kw)
        # kept rewards 1 - 0.05, 0 - 0.01, 1 - 0.02: the excluded row's KL (9.0) plays no part
        assert torch.equal(adv[[0, 1, 3]], original(column(1, 0, 1), k=3, kl_values=kl[[0, 1, 3]], **kw))
        assert adv[2].item() == 0.0

    @pytest.mark.parametrize(
        ("metric", "excluded"),
        [
            (1.0, True),  # weight-0 metric has a value, the weighted reward is None: excluded
            (NAN, True),  # both None
        ],
    )
    def test_weight_zero_metrics_do_not_count(self, metric: float, excluded: bool) -> None:
        weights = torch.tensor([1.0, 0.0])
        rewards = torch.tensor([[1, 0.5], [0, 0.5], [NAN, metric], [1, 0.5]])
        assert excluded_rows(rewards, weights).tolist() == [False, False, excluded, False]
        adv, _ = WRAPPED(rewards, weights, 4)
        assert torch.equal(adv[[0, 1, 3]], original(column(1, 0, 1), k=3)) and adv[2].item() == 0.0

    def test_a_nan_weight_zero_metric_alone_does_not_exclude(self) -> None:
        weights = torch.tensor([1.0, 0.0])
        rewards = torch.tensor([[1, NAN], [0, NAN], [0, NAN], [1, NAN]])
        assert not excluded_rows(rewards, weights).any()
        assert torch.equal(WRAPPED(rewards, weights, 4)[0], original(rewards, weights))

    @pytest.mark.parametrize("scale", ["group", "none", "batch"])
    def test_an_entirely_excluded_group(self, scale: str) -> None:
        rewards = column(NAN, NAN, NAN, NAN, 1, 0, 0, 1)
        adv, weighted = WRAPPED(rewards, ONE, 4, scale_rewards=scale)
        assert adv[:4].tolist() == [0.0] * 4
        assert not torch.isnan(adv).any() and not torch.isnan(weighted).any()
        if scale != "batch":  # batch std spans the filled rows: only group-local scalings are exact
            assert torch.equal(adv[4:], original(column(1, 0, 0, 1), scale_rewards=scale))

    @pytest.mark.parametrize("scale", ["group", "none", "batch"])
    def test_no_excluded_row_is_the_original_bit_for_bit(self, scale: str) -> None:
        rewards = torch.tensor([[1.0, 0.2], [0, NAN], [0.5, 0.1], [1, 0.9]])
        weights = torch.tensor([1.0, 0.5])
        ours = WRAPPED(rewards, weights, 2, scale_rewards=scale)
        theirs = compute_advantages(rewards, weights, 2, scale_rewards=scale)
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])


class TestInstall:
    def test_wraps_the_trainer_functions_exactly_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in ("compute_advantages", "collate_to_grpo_micro_batch"):
            monkeypatch.setattr(grpo_trainer, name, getattr(grpo_trainer, name))  # restored after the test
        before = (grpo_trainer.compute_advantages, grpo_trainer.collate_to_grpo_micro_batch)
        install()
        once = (grpo_trainer.compute_advantages, grpo_trainer.collate_to_grpo_micro_batch)
        install()
        assert (grpo_trainer.compute_advantages, grpo_trainer.collate_to_grpo_micro_batch) == once
        assert once[0] is not before[0] and once[1] is not before[1]
        assert grpo_trainer.compute_advantages(column(1, 0, NAN, 1), ONE, 4)[0][2].item() == 0.0

    def test_a_missing_function_names_the_supported_versions(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(grpo_trainer, "compute_advantages", grpo_trainer.compute_advantages)
        monkeypatch.delattr(grpo_trainer, "collate_to_grpo_micro_batch")
        with pytest.raises(RuntimeError, match=r"collate_to_grpo_micro_batch.*4\.4\.x-4\.6\.x"):
            install()


ENDINGS = ["user_stop", "user_sim_error", "max_turns", None]  # None: a sample without rollout_infos


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """ms-swift's qwen3 template over a tiny trained tokenizer (no download)."""
    from swift.model import get_processor
    from swift.template import get_template

    from rewardkit.pipelines.tiny_model import build_tiny_model

    model = build_tiny_model(
        tmp_path_factory.mktemp("tiny") / "m", ["hi there, how can I help? fine thanks"] * 8, vocab_size=300
    )
    tpl = get_template(get_processor(str(model)))
    tpl.set_mode("train")
    return tpl


def samples(template: Any) -> list[GRPOSample]:
    from swift.template import TemplateInputs

    out = []
    for i, ending in enumerate(ENDINGS):
        messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "fine " * (i + 1)}]
        sample = GRPOSample(messages=messages, rollout_infos={"termination": ending} if ending else {})
        sample.encoded = template.encode(TemplateInputs.from_dict({"messages": messages}))
        sample.encoded["length"] = len(sample.encoded["input_ids"])  # what packing reads
        out.append(sample)
    return out


class TestCollate:
    @pytest.mark.parametrize("padding_free", [False, True])
    def test_real_collate_zeroes_only_the_failed_episode(self, template: Any, padding_free: bool) -> None:
        template.padding_free = padding_free
        batch = samples(template)
        assert [is_excluded(s) for s in batch] == [False, True, False, False]
        cpu = torch.device("cpu")
        _, plain = collate_to_grpo_micro_batch(batch, template, device=cpu)
        _, ours = collate_excluding(collate_to_grpo_micro_batch)(batch, template, device=cpu)
        assert ours.completion_mask.shape[0] == len(batch) and plain.completion_mask[1].any()
        assert not ours.completion_mask[1].any()  # the failed episode's tokens are out of every loss term
        assert torch.equal(ours.completion_mask[[0, 2, 3]], plain.completion_mask[[0, 2, 3]])

    @staticmethod
    def packed(lengths: list[int]) -> Any:
        """A collate that returns one packed row [1, total] with per-sample seq_lengths."""

        def collate(batch: list[Any]) -> tuple[dict[str, Any], GRPOBatch]:
            total = sum(lengths)
            mask = torch.ones(1, total, dtype=torch.bool)
            return {}, GRPOBatch(mask, torch.zeros(len(batch), dtype=torch.bool), torch.tensor(lengths))

        return collate

    @pytest.mark.parametrize(
        ("drop", "expected"),
        [
            # seq_lengths [3, 2, 4]: sample 0 is columns 0-2, sample 1 is 3-4, sample 2 is 5-8
            ([False, True, False], [1, 1, 1, 0, 0, 1, 1, 1, 1]),
            ([True, False, False], [0, 0, 0, 1, 1, 1, 1, 1, 1]),
            ([False, False, True], [1, 1, 1, 1, 1, 0, 0, 0, 0]),
            ([False, False, False], [1] * 9),
        ],
    )
    def test_padding_free_packed_row_zeroes_only_the_excluded_span(self, drop: list[bool], expected: list) -> None:
        batch = [
            GRPOSample(messages=[], rollout_infos={"termination": "user_sim_error" if d else "user_stop"}) for d in drop
        ]
        _, out = collate_excluding(self.packed([3, 2, 4]))(batch)
        assert out.completion_mask.int().tolist() == [expected]
