from __future__ import annotations

import json

import pytest
from conftest import THINK, answer, completion, step

from rewardkit.config import ConfigError
from rewardkit.rewards import JsonValid

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may
# change. rows 0, 1 and 4 hold one schema-valid JSON answer.
CONTRACT = [1.0, 1.0, 0.0, 0.0, 1.0]

OK = answer("查看经营周报", step("数据分析专家", "查看经营周报"))

CASES = [
    (completion(THINK, OK), 1.0, "valid zh plan"),
    (completion(THINK, answer("q", step("a", "x"), step("b", "y", depends_on=[0]))), 1.0, "depends_on earlier step"),
    (completion(THINK, answer("q", step("a", "x", depends_on=[0]))), 0.0, "depends_on itself"),
    (completion(THINK, answer("q", step("a", "x"), step("b", "y", depends_on=[2]))), 0.0, "depends_on a later step"),
    (completion(THINK, answer("q")), 1.0, "empty plan is schema-valid"),
    (completion(THINK, {"plan": []}), 0.0, "missing rewrite key"),
    (completion(THINK, {**OK, "extra": 1}), 0.0, "unknown top-level key"),
    (completion(THINK, answer("q", step("a"))), 0.0, "a step with no sub-question"),
    (completion(THINK, answer("q", {"专家": "a", "处理问题": "x"})), 0.0, "处理问题 must be a list"),
    (completion(THINK, "[1, 2]"), 0.0, "JSON array, not object"),
    (completion(THINK, "{'plan': []}"), 0.0, "single quotes are not JSON"),
    (completion(THINK, OK) + "\n<answer>\n{}\n</answer>", 0.0, "two answer blocks"),
    (
        "<think>\n<answer>" + json.dumps(OK, ensure_ascii=False) + "</answer>\n</think>\n\n",
        0.0,
        "plan only inside think",
    ),
    ("<answer>\n" + json.dumps(OK, ensure_ascii=False) + "\n</answer>", 1.0, "no think block: the answer still counts"),
    ("<think>\n" + json.dumps(OK, ensure_ascii=False), 0.0, "unclosed think swallows everything"),
    (completion(THINK, "[" * 100_000 + "]" * 100_000), 0.0, "nesting past the decoder's recursion limit"),
    (completion(THINK, "1" * 5000), 0.0, "an integer over Python's digit limit"),
]


class TestJsonValid:
    @pytest.mark.parametrize(("text", "expected", "why"), CASES, ids=[c[2] for c in CASES])
    def test_table(self, text: str, expected: float, why: str) -> None:
        assert JsonValid()([text]) == [expected]

    def test_en_preset(self) -> None:
        en = {"rewritten_query": "weekly report", "plan": [{"expert": "analyst", "tasks": ["show report"]}]}
        assert JsonValid(config={"schema": "en"})([completion(THINK, en), completion(THINK, OK)]) == [1.0, 0.0]

    def test_custom_schema_file(self, tmp_path) -> None:
        schema = {
            "type": "object",
            "required": ["q", "steps"],
            "properties": {"q": {"type": "string"}, "steps": {"type": "array"}},
        }
        path = tmp_path / "schema.json"
        path.write_text(json.dumps(schema))
        keys = {"rewrite": "q", "plan": "steps", "expert": "who", "tasks": "what"}
        reward = JsonValid(config={"schema": str(path), "schema_keys": keys})
        good = {"q": "x", "steps": [{"who": "a", "what": ["t"]}]}
        assert reward([completion(THINK, good), completion(THINK, {"q": 1})]) == [1.0, 0.0]

    def test_custom_schema_without_keys_fails_naming_the_key(self, tmp_path) -> None:
        path = tmp_path / "schema.json"
        path.write_text("{}")
        with pytest.raises(ValueError, match="schema_keys"):
            JsonValid(config={"schema": str(path)})

    def test_unknown_schema_fails_at_construction(self) -> None:
        with pytest.raises(ValueError, match="neither a preset"):
            JsonValid(config={"schema": "fr"})

    def test_config_error_is_a_value_error(self) -> None:
        assert issubclass(ConfigError, ValueError)
