"""Each reward's config section is the one source: defaults, validation, the example file and the README's key table
are derived from it, and this file fails when any of them drifts (issue 11, "Each reward owns its config")."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import E5, completion

from rewardkit.rewards import REWARDS, ExpertMatch, PlanCoverage, ThinkQuality
from rewardkit.rewards import _config as config
from rewardkit.rewards._config import (
    DEPRECATED_ALIASES,
    README_BEGIN,
    README_END,
    ConfigError,
    RewardConfig,
    SharedConfig,
    load_config,
    load_section,
)
from rewardkit.rewards._experts import ExpertMatchConfig
from rewardkit.rewards.rewrite_similarity import RewriteSimilarityConfig
from rewardkit.rewards.task_completion import TaskCompletionConfig
from rewardkit.rewards.think_length import ThinkLengthConfig
from rewardkit.rewards.think_quality import ThinkQualityConfig

REPO = Path(__file__).resolve().parents[1]
SECTIONS = config.sections()


def leaves(cls: type, prefix: str = "") -> list[tuple[str, dataclasses.Field[Any]]]:
    out = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(f.default):
            out += leaves(type(f.default), f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, f))
    return out


BEGIN = README_BEGIN.split(" (", 1)[0]  # the begin marker may carry a note after its name


def table_between_markers(text: str) -> str | None:
    """The README text between the begin marker's line and the end marker, or None without both markers."""
    if BEGIN not in text or README_END not in text:
        return None
    start = text.index("\n", text.index(BEGIN)) + 1
    return text[start : text.index(README_END, start)]


def nested(dotted: str, value: Any) -> dict[str, Any]:
    *heads, last = dotted.split(".")
    out: dict[str, Any] = {last: value}
    for head in reversed(heads):
        out = {head: out}
    return out


class TestGeneratedFiles:
    def test_example_config_is_what_the_declarations_generate(self) -> None:
        path = config.example_path()
        assert path.read_text(encoding="utf-8") == config.render_example(), (
            f"{path.relative_to(REPO)} differs from the config declarations; regenerate it: `{config.WRITE_HINT}`"
        )

    def test_readme_key_table_is_what_the_declarations_generate(self) -> None:
        table = table_between_markers((REPO / "README.md").read_text(encoding="utf-8"))
        if table is None:
            pytest.skip(
                f"README.md has no {BEGIN} ... {README_END} markers yet; `{config.TABLE_HINT}` prints the block"
            )
        assert table == config.render_table(), (
            f"README.md's key table differs from the config declarations; paste the output of `{config.TABLE_HINT}`"
        )

    def test_the_printed_block_is_what_the_readme_test_reads(self) -> None:
        readme = f"## Configuration\n\nText.\n\n{config.readme_table_block()}\nMore text.\n"
        assert table_between_markers(readme) == config.render_table()
        assert table_between_markers("no markers") is None

    def test_example_lists_every_key_with_its_default(self) -> None:
        import yaml

        loaded = yaml.safe_load(config.example_path().read_text(encoding="utf-8"))
        assert {**loaded, "user_sim": {}, "rollout": {}} == config.DEFAULTS

    def test_check_command(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert config.main(["--check"]) == 0
        assert config.main(["--table"]) == 0
        assert capsys.readouterr().out.endswith(README_END + "\n")


class TestDeclarations:
    def test_sections_are_the_rewards_keys(self) -> None:
        # The section name is the reward's registry key: no renamed keys.
        keys = [cls.SECTION for cls in SECTIONS]
        assert set(keys) <= set(REWARDS), keys
        assert keys == ["think_length", "think_quality", "rewrite_similarity", "expert_match", "plan_coverage",
                        "task_completion"]  # fmt: skip

    @pytest.mark.parametrize("cls", [SharedConfig, *SECTIONS], ids=lambda c: c.__name__)
    def test_every_field_has_a_default_and_a_meaning(self, cls: type) -> None:
        assert cls.__doc__
        for key, f in leaves(cls):
            assert f.default is not dataclasses.MISSING, key
            assert f.metadata["doc"].strip().endswith("."), key

    def test_defaults_are_the_declared_ones(self) -> None:
        cfg = load_config()
        assert cfg.shared == SharedConfig()
        for cls in SECTIONS:
            assert cfg.section(cls) == cls(), cls.__name__
            assert getattr(cfg, cls.SECTION) is cfg.section(cls)

    def test_each_reward_reads_its_own_section(self) -> None:
        cfg = load_config({"rewrite_similarity": {"alpha": 0.25}, "think_length": {"max": 99}})
        assert cfg.section(RewriteSimilarityConfig).alpha == 0.25
        assert cfg.section(ThinkLengthConfig).max == 99
        assert load_section(RewriteSimilarityConfig, {"rewrite_similarity": {"alpha": 0.75}}).alpha == 0.75
        assert load_section(TaskCompletionConfig).require_outputs is True

    def test_deprecated_flat_names_still_read(self) -> None:
        cfg = load_config(
            {
                "rewrite_similarity": {"alpha": 0.7, "cjk_units": "char"},
                "expert_match": {"fuzzy_threshold": 90},
                "task_completion": {"require_outputs": False},
            }
        )
        flat = (cfg.rewrite_alpha, cfg.rewrite_cjk_units, cfg.fuzzy_threshold, cfg.require_outputs)
        assert flat == (0.7, "char", 90, False)
        assert set(DEPRECATED_ALIASES) == {"rewrite_alpha", "rewrite_cjk_units", "fuzzy_threshold", "require_outputs"}
        with pytest.raises(dataclasses.FrozenInstanceError):
            cfg.rewrite_alpha = 0.1  # type: ignore[misc]

    def test_config_pickles(self) -> None:
        cfg = load_config({"think_quality": {"banned": ["x"]}})
        assert pickle.loads(pickle.dumps(cfg)) == cfg


class TestDerivedValidation:
    @pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.SECTION)
    def test_unknown_key_names_the_valid_ones(self, cls: type) -> None:
        valid = sorted(f.name for f in dataclasses.fields(cls))
        with pytest.raises(
            ConfigError, match=rf"overrides: {cls.SECTION}: .*valid keys here are {re.escape(str(valid))}"
        ):
            load_config({cls.SECTION: {"no_such_key": 1}})

    BOUNDED: ClassVar[list[tuple[str, dataclasses.Field[Any]]]] = [
        (f"{cls.SECTION}.{key}", f)
        for cls in SECTIONS
        for key, f in leaves(cls)
        if {"minimum", "maximum", "exclusiveMinimum"} & set(f.metadata["bounds"])
    ]

    @pytest.mark.parametrize(("key", "f"), BOUNDED, ids=[k for k, _ in BOUNDED])
    def test_ranges_come_from_the_declarations(self, key: str, f: dataclasses.Field[Any]) -> None:
        bounds = f.metadata["bounds"]
        low = bounds.get("minimum", bounds.get("exclusiveMinimum"))
        below = low - 1 if "minimum" in bounds else low
        with pytest.raises(ConfigError, match=rf"overrides: {key}: "):
            load_config(nested(key, below))
        if "maximum" in bounds:
            with pytest.raises(ConfigError, match=rf"overrides: {key}: .*expected"):
                load_config(nested(key, bounds["maximum"] + 1))

    @pytest.mark.parametrize(("key", "f"), [(f"{c.SECTION}.{k}", f) for c in SECTIONS for k, f in leaves(c)])
    def test_types_come_from_the_declarations(self, key: str, f: dataclasses.Field[Any]) -> None:
        # A value of no declared type fails, naming the key, the expected values and the meaning.
        with pytest.raises(ConfigError, match=rf"overrides: {key}: .*expected .*\(default "):
            load_config(nested(key, {"not": "this"}))

    def test_plugin_sections_only_need_to_be_mappings(self) -> None:
        load_config({"user_sim": {"kind": "scripted", "anything": [1]}, "rollout": {"max_turns": 4}})
        with pytest.raises(ConfigError, match=r"overrides: rollout: "):
            load_config({"rollout": 3})


class TestEnvironmentFile:
    def test_the_file_is_read_once_per_version(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = tmp_path / "rk.yaml"
        path.write_text("think_length:\n  max: 120\n", encoding="utf-8")
        monkeypatch.setenv("REWARDKIT_CONFIG", str(path))
        reads: list[Path] = []
        real = config._read_yaml
        monkeypatch.setattr(config, "_read_yaml", lambda file, name: reads.append(file) or real(file, name))
        assert [load_config().think_length.max for _ in range(3)] == [120] * 3
        assert reads == [path]  # three configs, one read
        path.write_text("think_length:\n  max: 140\n", encoding="utf-8")
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # a new version
        assert load_config().think_length.max == 140 and len(reads) == 2

    def test_callers_get_their_own_copy(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = tmp_path / "rk.yaml"
        path.write_text("user_sim:\n  kind: scripted\n", encoding="utf-8")
        first, _ = config.read_config_file(path)
        first["user_sim"]["kind"] = "changed"
        assert config.read_config_file(path)[0] == {"user_sim": {"kind": "scripted"}}

    def test_explicit_config_ignores_the_environment(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = tmp_path / "rk.yaml"
        path.write_text("think_quality:\n  repetition_ngram: 1\n", encoding="utf-8")
        monkeypatch.setenv("REWARDKIT_CONFIG", str(path))
        assert load_config().think_quality.repetition_ngram == 1
        assert RewardConfig.of(SharedConfig(schema="en")).think_quality == ThinkQualityConfig()
        with pytest.raises(ConfigError, match=r"code: think_quality\.repetition_ngram"):
            RewardConfig.of(ThinkQualityConfig(repetition_ngram=0))


class TestSharedExpertThreshold:
    # One setting, expert_match.fuzzy_threshold (ExpertMatchConfig in rewards/_experts.py), decides for both rewards
    # whether a near-miss name is the row's expert.
    GOLD = json.dumps({"补全后的问题": "分析营收", "plan": [{"专家": "数据分析专家", "处理问题": ["分析上月营收"]}]},
                      ensure_ascii=False)  # fmt: skip
    # "数据分析专" vs "数据分析专家": rapidfuzz ratio 90.9, so it resolves at 85 and not at 95.
    NEAR = completion(
        "拆解。", {"补全后的问题": "分析营收", "plan": [{"专家": "数据分析专", "处理问题": ["分析上月营收"]}]}
    )

    # At 95 the predicted item's expert stays unresolved, so its similarity is 1.0 * cross_expert 0.5, which still
    # matches (match_threshold 0.5): coverage 1, quality 0.5, diversity 1 -> (0.4 + 0.3 * 0.5 + 0.1) / 0.8.
    @pytest.mark.parametrize(("threshold", "expert_match", "plan_coverage"), [(85, 1.0, 1.0), (95, 0.0, 0.8125)])
    def test_both_rewards_use_it(self, threshold: float, expert_match: float, plan_coverage: float) -> None:
        cfg = {"expert_match": {"fuzzy_threshold": threshold}}
        columns = {"solution": [self.GOLD], "experts": [E5]}
        assert ExpertMatch(config=cfg)([self.NEAR], **columns) == [expert_match]
        reward = PlanCoverage(config=cfg)
        assert reward([self.NEAR], **columns) == [pytest.approx(plan_coverage)]
        assert reward.experts_cfg == ExpertMatchConfig(fuzzy_threshold=threshold)


class TestBuilderConfig:
    def test_sft_build_does_not_depend_on_the_environment(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from rewardkit.data_builders.planning._common import InputSpec
        from rewardkit.data_builders.planning.sft import SftOptions, build_sft

        inputs = [InputSpec(REPO / "examples/planning/teacher_p1.jsonl", None)]
        opts = SftOptions(on_error="skip")
        rows, report = build_sft(inputs, opts)
        assert rows, "the example teacher data keeps some rows"

        env = tmp_path / "rk.yaml"
        env.write_text("think_quality:\n  banned: [专家]\n  repetition_ngram: 1\n  min_distinct_ratio: 1.0\n",
                       encoding="utf-8")  # fmt: skip
        monkeypatch.setenv("REWARDKIT_CONFIG", str(env))
        # The file would change the filter if it were read: every think names an expert.
        texts = [row["messages"][-1]["content"] for row in rows]
        assert set(ThinkQuality()(texts)) == {0.0}
        rows_env, report_env = build_sft(inputs, opts)
        assert rows_env == rows
        assert (report_env.read, report_env.written, report_env.rejected) == (report.read, report.written,
                                                                              report.rejected)  # fmt: skip

    def test_sft_filter_settings_are_explicit_options(self, tmp_path: Path) -> None:
        from rewardkit.data_builders.planning._common import InputSpec
        from rewardkit.data_builders.planning.sft import SftOptions, build_sft

        inputs = [InputSpec(REPO / "examples/planning/teacher_p1.jsonl", None)]
        strict = SftOptions(on_error="skip", think_quality=ThinkQualityConfig(banned=("专家",)))
        _, report = build_sft(inputs, strict)
        assert report.rejected["think_quality"] > 0
