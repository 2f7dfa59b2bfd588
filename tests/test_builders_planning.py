from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import E5

from rewardkit.data_builders._io import BuildError
from rewardkit.data_builders.planning._common import InputSpec, PromptTemplate, mix, parse_input
from rewardkit.data_builders.planning.grpo import GrpoOptions, build_grpo
from rewardkit.data_builders.planning.sft import SftOptions, build_sft
from rewardkit.rewards import ExpertMatch, JsonValid

STEP = {"专家": "数据分析专家", "处理问题": ["查看经营周报"]}
THINK = "用户想查看经营周报，这属于数据分析专家的职责，问题明确不需要拆解。"  # 33 chars


def annotated(**over: Any) -> dict[str, Any]:
    return {
        "id": "a1",
        "query": "查看经营周报",
        "history": [],
        "experts": E5,
        "rewrite": "查看经营周报",
        "plan": [STEP],
        **over,
    }


def teacher(think: str = THINK, plan: list | None = None, **over: Any) -> dict[str, Any]:
    answer = {"补全后的问题": "查看经营周报", "plan": plan if plan is not None else [STEP]}
    output = f"<think>\n{think}\n</think>\n\n<answer>\n{json.dumps(answer, ensure_ascii=False)}\n</answer>"
    return {"id": "t1", "query": "查看经营周报", "history": [], "experts": E5, "output": output, **over}


def write(tmp_path: Path, name: str, records: list[Any]) -> InputSpec:
    path = tmp_path / name
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return InputSpec(path, None)


class TestPlanningGrpo:
    def test_row_shape_and_the_rewards_accept_the_gold(self, tmp_path: Path) -> None:
        rows, report = build_grpo([write(tmp_path, "a.jsonl", [annotated()])], GrpoOptions())
        assert report.as_dict() == {"read": 1, "written": 1, "rejected": {}}
        row = rows[0]
        assert [m["role"] for m in row["messages"]] == ["system", "user"]
        assert "数据分析专家" in row["messages"][0]["content"]
        assert row["experts"] == E5
        # The gold answer, wrapped as a completion, is a perfect answer for the rewards.
        gold = "<answer>\n" + row["solution"] + "\n</answer>"
        assert JsonValid()([gold]) == [1.0]
        assert ExpertMatch()([gold], solution=[row["solution"]], experts=[E5]) == [1.0]

    @pytest.mark.parametrize(
        ("record", "reason"),
        [
            (annotated(plan=[{"专家": "外星专家", "处理问题": ["x"]}]), "gold_expert_not_in_list"),
            (annotated(plan=[{**STEP, "depends_on": [1]}, STEP]), "gold_invalid"),
            (annotated(plan=[{"专家": "数据分析专家", "处理问题": []}]), "gold_invalid"),
            (annotated(rewrite=None), "gold_invalid"),
        ],
    )
    def test_rejects_bad_gold(self, tmp_path: Path, record: dict, reason: str) -> None:
        rows, report = build_grpo([write(tmp_path, "a.jsonl", [annotated(), record])], GrpoOptions())
        assert len(rows) == 1
        assert report.rejected == {reason: 1}

    def test_malformed_line_stops_with_file_and_line(self, tmp_path: Path) -> None:
        spec = write(tmp_path, "a.jsonl", [annotated(), "{not json", annotated()])
        with pytest.raises(BuildError, match=r"a\.jsonl:2: not valid JSON"):
            build_grpo([spec], GrpoOptions())

    def test_malformed_lines_skipped_and_counts_reconcile(self, tmp_path: Path) -> None:
        spec = write(tmp_path, "a.jsonl", [annotated(), "{not json", "[1]", {"query": "no experts"}, annotated()])
        _rows, report = build_grpo([spec], GrpoOptions(on_error="skip"))
        assert report.as_dict() == {"read": 5, "written": 2, "rejected": {"malformed": 3}}
        assert [r["source"].rsplit(":", 1)[1] for r in report.rejects] == ["2", "3", "4"]
        assert "missing field(s) ['experts', 'rewrite', 'plan']" in report.rejects[2]["detail"]

    def test_mixing_ratios_are_deterministic_and_keep_each_rows_list(self, tmp_path: Path) -> None:
        e8 = [*E5, "人群运营专家", "关键词配置专家", "对账结算专家"]
        old = write(tmp_path, "p1.jsonl", [annotated(id=f"p1-{i}") for i in range(30)])
        new = write(tmp_path, "p2.jsonl", [annotated(id=f"p2-{i}", experts=e8) for i in range(10)])
        specs = [InputSpec(old.path, 0.5), InputSpec(new.path, 0.5)]
        rows, report = build_grpo(specs, GrpoOptions(seed=7))
        # 50/50 and p2 has only 10: 10 + 10 written, 20 of p1 dropped by the mix.
        assert report.as_dict() == {"read": 40, "written": 20, "rejected": {"mix_downsampled": 20}}
        assert sum(r["id"].startswith("p2") for r in rows) == 10
        assert all(r["experts"] == (e8 if r["id"].startswith("p2") else E5) for r in rows)
        again, _ = build_grpo(specs, GrpoOptions(seed=7))
        other, _ = build_grpo(specs, GrpoOptions(seed=8))
        assert [r["id"] for r in again] == [r["id"] for r in rows]
        assert [r["id"] for r in other] != [r["id"] for r in rows]

    def test_en_schema_renames_the_step_keys(self, tmp_path: Path) -> None:
        rows, _ = build_grpo([write(tmp_path, "a.jsonl", [annotated()])], GrpoOptions(schema="en"))
        assert json.loads(rows[0]["solution"]) == {
            "rewritten_query": "查看经营周报",
            "plan": [{"expert": "数据分析专家", "tasks": ["查看经营周报"]}],
        }


class TestPrompt:
    def test_renders_lists_and_a_sliding_history_window(self) -> None:
        history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"第{i}句"} for i in range(8)]
        record = annotated(history=history, tools=["经营周报"], products=["收钱码"])
        text = PromptTemplate(history_turns=2).render(record)
        assert "、".join(E5) in text and "可用工具：经营周报" in text and "产品服务：收钱码" in text
        # last 2 turns = last 4 messages
        assert "第3句" not in text and "用户：第4句" in text and "助手：第7句" in text

    def test_no_history_and_no_think_prompt(self) -> None:
        text = PromptTemplate(no_think=True).render(annotated())
        assert "最近对话：\n无" in text and "<think>" not in text

    def test_template_must_have_the_placeholders(self, tmp_path: Path) -> None:
        bad = tmp_path / "p.txt"
        bad.write_text("no placeholders here")
        with pytest.raises(ValueError, match="lacks placeholders"):
            PromptTemplate(bad)

    def test_input_spec_parsing(self) -> None:
        assert parse_input("a.jsonl:0.3") == InputSpec(Path("a.jsonl"), 0.3)
        assert parse_input("a.jsonl") == InputSpec(Path("a.jsonl"), None)
        with pytest.raises(ValueError, match="ratio for every"):
            mix([[1], [2]], [0.5, None], seed=0)


class TestPlanningSft:
    @pytest.mark.parametrize(
        ("record", "reason"),
        [
            ({**teacher(), "output": teacher()["output"].replace("</think>\n\n", "</think>\n")}, "format"),
            ({**teacher(), "output": teacher()["output"].replace('"plan"', '"plans"')}, "json_schema"),
            (teacher(plan=[{"专家": "外星专家", "处理问题": ["x"]}]), "expert_not_in_list"),
            (
                teacher(gold={"补全后的问题": "q", "plan": [{"专家": "策略推荐专家", "处理问题": ["x"]}]}),
                "experts_mismatch",
            ),
            (teacher(think='直接给出 "plan": [数据分析专家]'), "think_quality"),
            (teacher(think="太短了"), "think_length"),
            (teacher(think="很长的思考，" * 60), "think_length"),
        ],
    )
    def test_each_filter_rejects_with_its_reason(self, tmp_path: Path, record: dict, reason: str) -> None:
        rows, report = build_sft([write(tmp_path, "t.jsonl", [teacher(), record])], SftOptions())
        assert len(rows) == 1 and report.rejected == {reason: 1}
        assert rows[0]["messages"][-1]["content"] == teacher()["output"]

    @pytest.mark.parametrize(
        ("name", "kept"),
        [
            ("数据分析专家", True),  # the listed name
            ("数据分析 专家", True),  # whitespace is folded by the shared rule before any comparison
            ("数据分析专家x", False),  # rapidfuzz ratio 92.3: ExpertMatch's 85 forgives it, SFT's 100 does not
        ],
    )
    def test_the_expert_rule_is_the_rewards_with_threshold_100(self, tmp_path: Path, name: str, kept: bool) -> None:
        record = teacher(plan=[{"专家": name, "处理问题": ["查看经营周报"]}])
        _, report = build_sft([write(tmp_path, "t.jsonl", [record])], SftOptions())
        assert (report.written == 1) is kept and report.rejected.get("expert_not_in_list", 0) == (not kept)
        gold = json.dumps({"补全后的问题": "查看经营周报", "plan": [STEP]}, ensure_ascii=False)
        assert ExpertMatch()([record["output"]], solution=[gold], experts=[E5]) == [1.0]  # the reward accepts all three

    def test_gold_with_same_experts_is_kept(self, tmp_path: Path) -> None:
        record = teacher(gold={"补全后的问题": "q", "plan": [{"专家": "数据分析专家", "处理问题": ["x"]}]})
        rows, report = build_sft([write(tmp_path, "t.jsonl", [record])], SftOptions())
        assert report.written == 1 and len(rows) == 1

    def test_keep_shortest_fraction(self, tmp_path: Path) -> None:
        records = [teacher(think=THINK + "补充" * i, id=f"t{i}") for i in range(10)]
        rows, report = build_sft([write(tmp_path, "t.jsonl", records)], SftOptions(keep_shortest=0.3))
        assert sorted(r["id"] for r in rows) == ["t0", "t1", "t2"]
        assert report.rejected == {"not_shortest": 7}

    def test_no_think_targets_are_answer_only(self, tmp_path: Path) -> None:
        rows, _ = build_sft([write(tmp_path, "t.jsonl", [teacher()])], SftOptions(no_think=True))
        target = rows[0]["messages"][-1]["content"]
        assert target.startswith("<answer>\n{") and "<think>" not in target
        assert JsonValid()([target]) == [1.0]
        assert "<think>" not in rows[0]["messages"][0]["content"]

    def test_bad_options_fail_naming_the_flag(self) -> None:
        with pytest.raises(ValueError, match="--keep-shortest"):
            SftOptions(keep_shortest=0)
        with pytest.raises(ValueError, match="--think-min"):
            SftOptions(think_min=50, think_max=10)
