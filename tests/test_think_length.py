from __future__ import annotations

import pytest
from conftest import completion

from rewardkit.config import ConfigError
from rewardkit.rewards import ThinkLength

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may
# change. 44 chars; row 1: band 60-80, d 16, S(0.8)/S(0).
CONTRACT = [0.990421, 0.197400, 0.0, 0.0, 0.0]

BAND = {"think_length": {"min": 10, "max": 20}}  # eps defaults to 20 - 10 = 10, mid = 15


def think_of(n: int) -> str:
    return completion("字" * n, "{}")


# S(x) = 1 / (1 + exp(5 (x - 0.5)));  S(0) = 0.924142
REFERENCE = [
    (10, 1.0),  # inside, lower edge
    (20, 1.0),  # inside, upper edge
    (21, 0.377541),  # x = |21-15|/10 = 0.6 -> 1/(1+e^0.5)
    (9, 0.377541),  # symmetric: x = |9-15|/10 = 0.6
    (25, 0.075858),  # x = 1.0 -> 1/(1+e^2.5)
    (0, 0.0),  # empty think -> 0 by rule
]
SMOOTH = [
    (15, 1.0),
    (20, 1.0),
    (21, 0.953097),  # d = 1, S(0.1)/S(0) = 0.880797/0.924142
    (9, 0.953097),  # d = 10 - 9 = 1
    (25, 0.541043),  # d = 5, S(0.5)/S(0) = 0.5/0.924142
    (40, 0.000598),  # d = 20, S(2.0)/S(0) = 0.000553/0.924142
    (0, 0.0),
]


class TestThinkLength:
    @pytest.mark.parametrize(("n", "expected"), REFERENCE)
    def test_reference_mode(self, n: int, expected: float) -> None:
        reward = ThinkLength(config={**BAND, "think_length": {**BAND["think_length"], "mode": "reference"}})
        assert reward([think_of(n)]) == [pytest.approx(expected, abs=1e-6)]

    @pytest.mark.parametrize(("n", "expected"), SMOOTH)
    def test_smooth_mode(self, n: int, expected: float) -> None:
        assert ThinkLength(config=BAND)([think_of(n)]) == [pytest.approx(expected, abs=1e-6)]

    def test_smooth_is_continuous_at_the_edges_where_reference_jumps(self) -> None:
        from rewardkit.rewards.think_length import reference_curve, smooth_curve

        for edge, step in ((20, 1e-6), (10, -1e-6)):
            assert smooth_curve(edge + step, 10, 20, 10) == pytest.approx(1.0, abs=1e-5)
            assert reference_curve(edge + step, 10, 20, 10) == pytest.approx(0.5, abs=1e-5)

    def test_missing_think_is_zero(self) -> None:
        assert ThinkLength(config=BAND)(["<answer>\n{}\n</answer>", "no tags at all"]) == [0.0, 0.0]

    def test_whitespace_around_think_is_not_counted(self) -> None:
        padded = "<think>\n\n   " + "字" * 15 + "   \n\n</think>\n\n<answer>\n{}\n</answer>"
        assert ThinkLength(config=BAND)([padded]) == [1.0]

    def test_explicit_eps(self) -> None:
        reward = ThinkLength(config={"think_length": {"min": 10, "max": 20, "eps": 2, "mode": "reference"}})
        # x = |21 - 15| / 2 = 3.0 -> 1/(1+e^12.5) = 3.7e-6
        assert reward([think_of(21)]) == [pytest.approx(3.727e-6, rel=1e-3)]

    def test_per_row_band_overrides(self) -> None:
        reward = ThinkLength(config=BAND)
        texts = [think_of(30), think_of(30), think_of(30)]
        # row 0: default band 10..20 -> d = 10, S(1.0)/S(0) = 0.0821; rows 1-2 widen the band to include 30
        scores = reward(texts, think_min=[None, 5, None], think_max=[None, 40, 30])
        assert scores == [pytest.approx(0.082085, abs=1e-6), 1.0, 1.0]

    def test_row_band_inverted_fails_naming_the_columns(self) -> None:
        with pytest.raises(ValueError, match="think_min"):
            ThinkLength(config=BAND)([think_of(5)], think_min=[30], think_max=[20])

    def test_huge_length_does_not_overflow(self) -> None:
        assert ThinkLength(config={**BAND, "think_length": {"mode": "reference"}})([think_of(10**6)]) == [0.0]

    def test_token_unit_uses_the_tokenizer(self, minilm_path: str) -> None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(minilm_path, local_files_only=True)
        reward = ThinkLength(config={"think_length": {"unit": "tokens", "min": 2, "max": 3}}, tokenizer=tok)
        # "hello world" -> 2 word pieces, inside the band; 40 x "hello" -> 40 tokens, far outside
        assert reward([completion("hello world", "{}"), completion("hello " * 40, "{}")]) == [
            1.0,
            pytest.approx(0.0, abs=1e-6),
        ]

    def test_token_unit_loads_the_tokenizer_from_args_model(self, minilm_path: str) -> None:
        class Args:
            model = minilm_path

        reward = ThinkLength(args=Args(), config={"think_length": {"unit": "tokens", "min": 2, "max": 3}})
        assert reward([completion("hello world", "{}")]) == [1.0]

    def test_token_unit_without_a_model_fails_at_construction(self) -> None:
        with pytest.raises(ConfigError, match=r"think_length\.unit"):
            ThinkLength(config={"think_length": {"unit": "tokens"}})

    @pytest.mark.parametrize(
        ("override", "key"),
        [
            ({"min": 30, "max": 20}, "think_length.min"),
            ({"mode": "linear"}, "think_length.mode"),
            ({"min": "10"}, "think_length.min"),
            ({"eps": 0}, "think_length.eps"),
            ({"window": 3}, "think_length"),
        ],
    )
    def test_bad_config_names_the_key(self, override: dict, key: str) -> None:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            ThinkLength(config={"think_length": override})

    def test_token_unit_is_thread_safe_and_picklable(self, minilm_path: str) -> None:
        import pickle
        from concurrent.futures import ThreadPoolExecutor

        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(minilm_path, local_files_only=True)
        reward = ThinkLength(config={"think_length": {"unit": "tokens", "min": 2, "max": 30}}, tokenizer=tok)
        batch = [completion("hello world " * (i % 40), "{}") for i in range(32)]
        expected = reward(batch)
        assert len(set(expected)) > 2  # the batch spans inside and outside the band
        with ThreadPoolExecutor(max_workers=8) as pool:
            assert all(r == expected for r in pool.map(lambda _: reward(batch), range(64)))
        assert pickle.loads(pickle.dumps(reward))(batch) == expected
