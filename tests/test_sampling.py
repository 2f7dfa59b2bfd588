"""rewardkit.loop.sampling: the evaluation draws tokens as GRPO's rollouts draw them, seeded per row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from scipy.stats import chisquare

from rewardkit.loop.sampling import TRANSFORMERS_TOP_K, Sampling, SeededSampler, rollout_sampling
from rewardkit.runs.episodes.episode_log import RunError
from rewardkit.runs.episodes.spec import RunSpec, build_plan

# (recipe keys, how its rollouts sample). ms-swift's GRPO defaults: temperature 0.9, top_k -1, top_p 1.0.
RECIPES = [
    ({}, Sampling(0.9, 50, 1.0)),  # transformers engine: top_k unset -> transformers' 50
    ({"use_vllm": True}, Sampling(0.9, None, 1.0)),  # vLLM: -1 is every token
    ({"temperature": 1.0, "top_k": 20}, Sampling(1.0, 20, 1.0)),  # set: taken as it is, on either engine
    ({"top_k": 0}, Sampling(0.9, 50, 1.0)),  # 0 is unset too (ms-swift maps k <= 0 to None)
    ({"use_vllm": True, "top_p": 0.95, "temperature": 0.7}, Sampling(0.7, None, 0.95)),
]


@pytest.mark.parametrize(("recipe", "expected"), RECIPES)
def test_rollout_sampling_reads_a_grpo_recipe_as_ms_swift_does(recipe: dict, expected: Sampling) -> None:
    assert rollout_sampling(recipe) == expected


def test_the_transformers_default_top_k_is_the_installed_ones() -> None:
    from transformers import GenerationConfig

    assert GenerationConfig._get_default_generation_params()["top_k"] == TRANSFORMERS_TOP_K


def test_ms_swift_and_transformers_build_the_warpers_the_sampler_uses() -> None:
    # The GRPO request of a recipe with top_k unset, through ms-swift's generation config and transformers' own
    # processor list, as the rollouts' generate call builds them: temperature, then top-k 50, then top-p.
    from swift.infer_engine import RequestConfig
    from swift.infer_engine.utils import prepare_generation_config
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    model = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=128,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
        )
    )

    class Tokenizer:
        eos_token_id, pad_token_id = 1, 0

    request = RequestConfig(max_tokens=8, temperature=0.7, top_k=-1, top_p=0.9, repetition_penalty=1.0)
    config = prepare_generation_config(GenerationConfig(), request, Tokenizer())
    config = model._prepare_generation_config(config)[0]
    theirs = model._get_logits_processor(generation_config=config, input_ids_seq_length=1, device="cpu")
    ours = SeededSampler([0], rollout_sampling({"temperature": 0.7, "top_p": 0.9})).warpers
    assert [(type(w).__name__, vars(w)) for w in theirs] == [(type(w).__name__, vars(w)) for w in ours]


def test_draws_follow_the_warped_distribution() -> None:
    # 6 tokens, top-k 3 at temperature 0.5: logits 2, 1, 0.5 survive; softmax(4, 2, 1) = 0.844, 0.114, 0.042.
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.2, 0.0, -1.0]])
    draws = [int(SeededSampler([seed], Sampling(0.5, 3))(None, logits).argmax()) for seed in range(4000)]
    counts = [draws.count(t) for t in range(6)]
    assert counts[3:] == [0, 0, 0]  # never outside the top 3
    expected = torch.softmax(torch.tensor([4.0, 2.0, 1.0], dtype=torch.float64), 0) * 4000
    assert chisquare(counts[:3], expected.tolist()).pvalue > 1e-3  # seeds 0..3999: the same draws every run


def test_a_rows_noise_depends_on_its_seed_alone() -> None:
    # Row "seed 7" draws the same noise whether it shares its batch with one other row or with three, at any place.
    scores = torch.zeros(4, 50)
    alone = SeededSampler([7], Sampling(1.0))(torch.zeros(1, 1, dtype=torch.long), scores[:1])
    batched = SeededSampler([3, 9, 7, None], Sampling(1.0))(torch.zeros(4, 1, dtype=torch.long), scores)
    assert torch.equal(alone[0], batched[2])
    assert not torch.equal(batched[0], batched[2])  # another seed, other noise


def test_greedy_is_refused_by_the_sampler() -> None:
    with pytest.raises(ValueError, match="temperature > 0"):
        SeededSampler([1], Sampling(0.0))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": -1.0}, "temperature must be a finite number >= 0"),
        ({"temperature": 1.0, "top_k": 0}, "top_k must be a whole number >= 1"),
        ({"temperature": 1.0, "top_p": 0.0}, r"top_p must be a number in \(0, 1\]"),
        ({"temperature": 1.0, "top_p": 1.5}, r"top_p must be a number in \(0, 1\]"),
    ],
)
def test_a_bad_sampling_is_refused(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sampling(**fields)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": 1.0, "top_k": 0}, "--top-k must be a whole number >= 1"),
        ({"temperature": 1.0, "top_p": 0.0}, r"--top-p must be a number in \(0, 1\]"),
        ({"temperature": 1.0, "top_p": 1.5}, r"--top-p must be a number in \(0, 1\]"),
        ({"top_k": 50}, "--top-k samples, and temperature 0 is greedy: give a temperature > 0"),
        ({"temperature": -1.0}, "--temperature must be a finite number >= 0"),
    ],
)
def test_run_spec_names_the_flag(fields: dict, message: str) -> None:
    with pytest.raises(RunError, match=message):
        build_plan(RunSpec(domain="retail", agent="gold", split="train", **fields))


def test_an_unset_top_k_takes_the_models_generation_config_first(tmp_path: Path) -> None:
    # Qwen3 ships top_k 20: ms-swift's transformers engine fills an unset top_k from it, before transformers' 50.
    (tmp_path / "generation_config.json").write_text(json.dumps({"top_k": 20, "top_p": 0.95}))
    assert rollout_sampling({"temperature": 1.0}, tmp_path) == Sampling(1.0, 20, 1.0)  # top_p: the recipe's 1.0
    assert rollout_sampling({"temperature": 1.0, "use_vllm": True}, tmp_path) == Sampling(1.0, None, 1.0)


def test_a_repetition_penalty_is_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match=r"repetition_penalty: 1\.1; the evaluation samples without one"):
        rollout_sampling({"repetition_penalty": 1.1})


def test_an_endpoint_request_carries_only_the_fields_set() -> None:
    # The defaults stay out of the request (and so out of an existing run's fingerprint).
    assert Sampling(0.7).params() == {"temperature": 0.7}
    assert Sampling(0.7, 50, 0.9).params() == {"temperature": 0.7, "top_k": 50, "top_p": 0.9}
