"""The embedding backend on the real all-MiniLM-L6-v2 (shipped in a wheel, no download)."""

from __future__ import annotations

import pytest
from conftest import E5, THINK, answer, completion, solution, step

from rewardkit.rewards import PlanCoverage, RewriteSimilarity
from rewardkit.rewards._similarity import load_sentence_model


def pred(rewrite: str) -> str:
    return completion(THINK, answer(rewrite, step("数据分析专家", "x")))


def gold(rewrite: str) -> str:
    return solution(rewrite, step("数据分析专家", "x"))


@pytest.fixture(scope="module")
def semantic(minilm_path: str) -> RewriteSimilarity:
    # alpha 1: the pure embedding cosine, no lexical coverage term.
    return RewriteSimilarity(
        config={"backend": "embedding", "embedding_model": minilm_path, "rewrite_similarity": {"alpha": 1.0}}
    )


class TestEmbeddingBackend:
    @pytest.mark.parametrize(
        ("reference", "paraphrase", "unrelated"),
        [
            (
                "Show me last week's sales report",
                "Display the sales figures for the previous week",
                "Design a banner for the spring sale",
            ),
            (
                "How do I open a store on the platform?",
                "What are the steps to register as a merchant?",
                "Summarise today's news",
            ),
            (
                "Recommend three ways to grow revenue",
                "Suggest 3 strategies to increase income",
                "Reconcile this month's bill",
            ),
        ],
    )
    def test_paraphrase_beats_unrelated(
        self, semantic: RewriteSimilarity, reference: str, paraphrase: str, unrelated: str
    ) -> None:
        para, other = semantic([pred(paraphrase), pred(unrelated)], solution=[gold(reference)] * 2)
        assert para is not None and other is not None
        assert para > other + 0.2

    def test_identical_text_is_one(self, semantic: RewriteSimilarity) -> None:
        assert semantic([pred("weekly report")], solution=[gold("weekly report")]) == [pytest.approx(1.0, abs=1e-5)]

    def test_model_loads_once_per_process(self, minilm_path: str, semantic: RewriteSimilarity) -> None:
        other = PlanCoverage(config={"backend": "embedding", "embedding_model": minilm_path})
        assert load_sentence_model(minilm_path) is load_sentence_model(minilm_path)
        assert other.backend.model_path == semantic.backend.model_path

    def test_each_unique_text_is_embedded_once_per_batch(
        self, minilm_path: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        model = load_sentence_model(minilm_path)
        calls: list[list[str]] = []
        original = model.encode

        def spy(texts, *args, **kwargs):  # records, then runs the real model
            calls.append(list(texts))
            return original(texts, *args, **kwargs)

        monkeypatch.setattr(model, "encode", spy)
        reward = PlanCoverage(config={"backend": "embedding", "embedding_model": minilm_path})
        same = completion(THINK, answer("q", step("数据分析专家", "analyse revenue", "suggest strategies")))
        golds = [solution("q", step("数据分析专家", "analyse revenue"))] * 4
        scores = reward([same] * 4, solution=golds, experts=[E5] * 4)
        assert len(calls) == 1
        assert sorted(calls[0]) == ["analyse revenue", "suggest strategies"]
        assert scores[0] == scores[3] and scores[0] is not None and scores[0] > 0.5

    def test_missing_model_path_fails_at_construction(self, tmp_path) -> None:
        with pytest.raises(ValueError, match="embedding_model"):
            RewriteSimilarity(config={"backend": "embedding", "embedding_model": str(tmp_path / "none")})
