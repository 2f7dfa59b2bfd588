"""Loading a config: the file read once per version, callers' own copies, explicit configs; what a planning reward
imports; the expert threshold the rewards share; the builders' explicit config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import E5, completion

from rewardkit.config import ConfigError, read_config_file
from rewardkit.config import read as config_read
from rewardkit.loop.config import DiagnosticsLimits, RolloutLimits, load_run_config
from rewardkit.loop.user_sim import UserSimConfig
from rewardkit.rewards import PLANNING_REWARDS, REWARDS, ExpertMatch, PlanCoverage, ThinkLength, ThinkQuality
from rewardkit.rewards.config import ExpertMatchConfig, RewardConfig, SharedConfig, load_config
from rewardkit.rewards.registry import config_schema
from rewardkit.rewards.think_length import ThinkLengthConfig
from rewardkit.rewards.think_quality import ThinkQualityConfig

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "config.md"
SECTIONS = config_schema().sections
LOOP_SECTIONS = (UserSimConfig, RolloutLimits, DiagnosticsLimits)


class TestEnvironmentFile:
    def test_the_file_is_read_once_per_version(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = tmp_path / "rk.yaml"
        path.write_text("think_length:\n  max: 120\n", encoding="utf-8")
        monkeypatch.setenv("REWARDKIT_CONFIG", str(path))
        reads: list[Path] = []
        real = config_read._read_yaml
        monkeypatch.setattr(config_read, "_read_yaml", lambda file, name: reads.append(file) or real(file, name))
        assert [load_config().section(ThinkLengthConfig).max for _ in range(3)] == [120] * 3
        assert load_run_config().think_length.max == 120
        assert reads == [path]  # four configs of two schemas, one read
        path.write_text("think_length:\n  max: 140\n", encoding="utf-8")
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # a new version
        assert load_config().section(ThinkLengthConfig).max == 140 and len(reads) == 2

    def test_callers_get_their_own_copy(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = tmp_path / "rk.yaml"
        path.write_text("user_sim:\n  kind: scripted\n", encoding="utf-8")
        first, _ = read_config_file(path)
        first["user_sim"]["kind"] = "changed"
        assert read_config_file(path)[0] == {"user_sim": {"kind": "scripted"}}

    def test_explicit_config_ignores_the_environment(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = tmp_path / "rk.yaml"
        path.write_text("think_quality:\n  repetition_ngram: 1\n", encoding="utf-8")
        monkeypatch.setenv("REWARDKIT_CONFIG", str(path))
        assert load_config().section(ThinkQualityConfig).repetition_ngram == 1
        assert RewardConfig.of(SharedConfig(schema="en")).section(ThinkQualityConfig) == ThinkQualityConfig()
        with pytest.raises(ConfigError, match=r"code: think_quality\.repetition_ngram"):
            RewardConfig.of(ThinkQualityConfig(repetition_ngram=0))


# Run in a fresh interpreter: what importing the package, building and calling planning rewards import.
ONLY_PLANNING = """
import sys
import rewardkit.rewards
from rewardkit.rewards import StrictFormat, ThinkLength
from rewardkit.rewards.think_length import ThinkLength as Same
assert ThinkLength is Same and StrictFormat()(["x"]) == [0.0]
assert ThinkLength(config={"think_length": {"min": 0}}).cfg.min == 0
found = [m for m in sys.modules if m.startswith(("rewardkit.envs", "rewardkit.rewards.task_completion",
                                                  "rewardkit.rewards._episodes", "rewardkit.loop", "swift"))]
assert not found, found
"""


def test_a_planning_reward_imports_no_environment() -> None:
    env = {k: v for k, v in os.environ.items() if k != "REWARDKIT_CONFIG"}
    done = subprocess.run([sys.executable, "-c", ONLY_PLANNING], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]


class TestSharedExpertThreshold:
    # One setting, expert_match.fuzzy_threshold (ExpertMatchConfig in rewards/config.py), decides for both rewards
    # whether a near-miss name is the row's expert.
    GOLD = json.dumps(
        {"补全后的问题": "分析营收", "plan": [{"专家": "数据分析专家", "处理问题": ["分析上月营收"]}]},
        ensure_ascii=False,
    )
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
        assert reward.config.section(ExpertMatchConfig) == ExpertMatchConfig(fuzzy_threshold=threshold)


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
        env.write_text(
            "think_quality:\n  banned: [专家]\n  repetition_ngram: 1\n  min_distinct_ratio: 1.0\n", encoding="utf-8"
        )
        monkeypatch.setenv("REWARDKIT_CONFIG", str(env))
        # The file would change the filter if it were read: every think names an expert.
        texts = [row["messages"][-1]["content"] for row in rows]
        assert set(ThinkQuality()(texts)) == {0.0}
        rows_env, report_env = build_sft(inputs, opts)
        assert rows_env == rows
        assert (report_env.read, report_env.written, report_env.rejected) == (
            report.read,
            report.written,
            report.rejected,
        )

    def test_sft_filter_settings_are_explicit_options(self, tmp_path: Path) -> None:
        from rewardkit.data_builders.planning._common import InputSpec
        from rewardkit.data_builders.planning.sft import SftOptions, build_sft

        inputs = [InputSpec(REPO / "examples/planning/teacher_p1.jsonl", None)]
        strict = SftOptions(on_error="skip", think_quality=ThinkQualityConfig(banned=("专家",)))
        _, report = build_sft(inputs, strict)
        assert report.rejected["think_quality"] > 0


# The whole file from $REWARDKIT_CONFIG: defaults without one, its values over the defaults in every reward, and a
# bad or missing file named at construction.


def write(tmp_path, text: str):
    path = tmp_path / "rk.yaml"
    path.write_text(text, encoding="utf-8")
    return path


class TestWholeFile:
    def test_defaults_without_a_file(self) -> None:
        cfg = config_schema().load()  # the whole file: every section built
        assert (cfg.schema, cfg.backend, cfg.think_length.mode) == ("zh", "lexical", "smooth")

    def test_env_file_overrides_defaults_and_keeps_the_rest(self, tmp_path, monkeypatch) -> None:
        path = write(tmp_path, "think_length:\n  max: 120\nrewrite_similarity:\n  alpha: 0.7\n")
        monkeypatch.setenv("REWARDKIT_CONFIG", str(path))
        cfg = config_schema().load()
        assert cfg.think_length.max == 120
        assert cfg.think_length.min == config_schema().defaults["think_length"]["min"]
        assert cfg.rewrite_similarity.alpha == 0.7

    def test_every_reward_reads_the_env_file(self, tmp_path, monkeypatch) -> None:
        monkeypatch.setenv("REWARDKIT_CONFIG", str(write(tmp_path, "schema: en\n")))
        assert all(cls().schema.name == "en" for cls in PLANNING_REWARDS.values())

    @pytest.mark.parametrize(
        ("yaml_text", "key"),
        [
            ("thinklength:\n  max: 3\n", "thinklength"),
            ("think_length:\n  max: lots\n", "think_length.max"),
            ("think_length:\n  min: 400\n", "think_length.min"),  # default max is 300
            ("backend: bm25\n", "backend"),
            ("backend: embedding\n", "embedding_model"),
            ("plan_coverage:\n  weights:\n    speed: 1\n", "plan_coverage.weights"),
            ("expert_match:\n  fuzzy_threshold: 101\n", "expert_match.fuzzy_threshold"),
            ("- a list\n", "top level"),
        ],
    )
    def test_bad_file_fails_at_construction_naming_the_key(self, tmp_path, monkeypatch, yaml_text, key) -> None:
        # The reward that reads the section fails when built (a bad shared key fails any reward); the whole file
        # fails when ms-swift loads the plugin (config_schema().load()), before the model loads.
        monkeypatch.setenv("REWARDKIT_CONFIG", str(write(tmp_path, yaml_text)))
        owner = key.split(".")[0]
        reader = REWARDS.get(owner, ThinkLength)
        for build in (reader, config_schema().load):
            with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
                build()

    def test_unknown_key_message_lists_valid_keys(self) -> None:
        with pytest.raises(
            ConfigError,
            match=r"^overrides: think_length\.maxx: .*valid keys here are \['eps', 'max', 'min', 'mode', 'unit'\]",
        ):
            ThinkLength(config={"think_length": {"maxx": 3}})
        with pytest.raises(ConfigError, match=r"^overrides: think_length\.maxx: "):  # read later: the same message
            load_config({"think_length": {"maxx": 3}}).section(ThinkLength.section)

    def test_missing_file_names_the_variable(self, tmp_path, monkeypatch) -> None:
        monkeypatch.setenv("REWARDKIT_CONFIG", str(tmp_path / "nope.yaml"))
        with pytest.raises(ConfigError, match="REWARDKIT_CONFIG"):
            load_config()

    def test_bundled_rewards_recipe_config_is_valid(self) -> None:
        from rewardkit.recipes import recipe_path

        cfg = load_config(path=recipe_path("planning/reward_config.yaml"))
        assert cfg.schema == "zh"
