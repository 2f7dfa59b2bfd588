from __future__ import annotations

import pytest

from rewardkit.config import ConfigError
from rewardkit.rewards import PLANNING_REWARDS, REWARDS, ThinkLength
from rewardkit.rewards.config import load_config
from rewardkit.rewards.registry import config_schema


def write(tmp_path, text: str):
    path = tmp_path / "rk.yaml"
    path.write_text(text, encoding="utf-8")
    return path


class TestConfig:
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
