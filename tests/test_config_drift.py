"""Each config section is the one source: defaults, validation, the example file and the key table of docs/config.md
are derived from it, and this file fails when any of them drifts."""

from __future__ import annotations

import dataclasses
import pickle
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from rewardkit.cli import config as cli_config
from rewardkit.cli import main as cli_main
from rewardkit.config import ConfigError, ConfigSchema, config_section, setting
from rewardkit.config.reference import (
    TABLE_BEGIN,
    TABLE_END,
    render_example,
    render_table,
    table_block,
    table_in,
    with_table,
)
from rewardkit.loop.config import RUN_SCHEMA, DiagnosticsLimits, RolloutLimits, load_run_config
from rewardkit.loop.user_sim import UserSimConfig
from rewardkit.rewards import REWARDS
from rewardkit.rewards.config import SharedConfig, load_config, load_section
from rewardkit.rewards.registry import config_schema
from rewardkit.rewards.rewrite_similarity import RewriteSimilarityConfig
from rewardkit.rewards.task_completion import TaskCompletionConfig
from rewardkit.rewards.think_length import ThinkLengthConfig

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "config.md"
SECTIONS = config_schema().sections
LOOP_SECTIONS = (UserSimConfig, RolloutLimits, DiagnosticsLimits)


def leaves(cls: type, prefix: str = "") -> list[tuple[str, dataclasses.Field[Any]]]:
    out = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(f.default):
            out += leaves(type(f.default), f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, f))
    return out


def nested(dotted: str, value: Any) -> dict[str, Any]:
    *heads, last = dotted.split(".")
    out: dict[str, Any] = {last: value}
    for head in reversed(heads):
        out = {head: out}
    return out


def rollout_limits(raw: Any, source: str) -> RolloutLimits:
    """The ``rollout`` section alone, checked as if it stood in a file named ``source``."""
    return RUN_SCHEMA.section(RolloutLimits, raw, source)


class TestGeneratedFiles:
    def test_example_config_is_what_the_declarations_generate(self) -> None:
        path = REPO / "recipes" / cli_config.EXAMPLE
        assert path.read_text(encoding="utf-8") == render_example(RUN_SCHEMA, cli_config.HEADER), (
            f"{path.relative_to(REPO)} differs from the config declarations; regenerate it: `{cli_config.WRITE_HINT}`"
        )

    def test_docs_key_table_is_what_the_declarations_generate(self) -> None:
        table = table_in(DOCS.read_text(encoding="utf-8"))
        assert table is not None, f"{DOCS.relative_to(REPO)} lost its {TABLE_BEGIN} ... {TABLE_END} markers"
        assert table == render_table(RUN_SCHEMA), (
            f"{DOCS.relative_to(REPO)}'s key table differs from the config declarations; `{cli_config.TABLE_HINT}`"
        )

    def test_the_printed_block_is_what_the_docs_test_reads(self) -> None:
        page = f"# Configuration\n\nText.\n\n{table_block(render_table(RUN_SCHEMA))}\nMore text.\n"
        assert table_in(page) == render_table(RUN_SCHEMA)
        assert table_in("no markers") is None
        assert with_table(page.replace(render_table(RUN_SCHEMA), "| old |\n"), render_table(RUN_SCHEMA)) == page
        with pytest.raises(ValueError, match="markers"):
            with_table("no markers", "| x |\n")

    def test_every_key_is_documented_once(self) -> None:
        # The whole file: the rewards' sections, then the loop's, each key one row.
        rows = [line.split("`")[1] for line in render_table(RUN_SCHEMA).splitlines()[2:]]
        keys = [k for k, _ in leaves(SharedConfig)] + [
            f"{c.SECTION}.{k}" for c in (*SECTIONS, *LOOP_SECTIONS) for k, _ in leaves(c)
        ]
        assert rows == keys

    def test_example_lists_every_key_with_its_default(self) -> None:
        loaded = yaml.safe_load((REPO / "recipes" / cli_config.EXAMPLE).read_text(encoding="utf-8"))
        assert loaded == RUN_SCHEMA.defaults
        assert load_run_config(path=REPO / "recipes" / cli_config.EXAMPLE) == load_run_config()

    def test_check_command(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        assert cli_main(["config", "check", "--docs", str(DOCS)]) == 0
        assert cli_main(["config", "table"]) == 0
        assert capsys.readouterr().out.endswith(TABLE_END + "\n")
        assert cli_main(["config", "example"]) == 0
        assert capsys.readouterr().out == render_example(RUN_SCHEMA, cli_config.HEADER)
        stale = tmp_path / "config.md"
        stale.write_text(f"# Config\n\n{TABLE_BEGIN}\n| old |\n{TABLE_END}\n", encoding="utf-8")
        assert cli_main(["config", "check", "--docs", str(stale)]) == 1
        assert "key table is out of date" in capsys.readouterr().err
        assert cli_main(["config", "table", "--write", str(stale)]) == 0
        assert table_in(stale.read_text(encoding="utf-8")) == render_table(RUN_SCHEMA)
        assert cli_main(["config", "check", "--docs", str(stale)]) == 0
        bare = tmp_path / "bare.md"
        bare.write_text("# no markers\n", encoding="utf-8")
        assert cli_main(["config", "check", "--docs", str(bare)]) == 1
        assert cli_main(["config", "table", "--write", str(bare)]) == 2
        assert "no key-table markers" in capsys.readouterr().err


class TestDeclarations:
    def test_sections_are_the_rewards_keys(self) -> None:
        # The section name is the registry key of the reward that declares it (several may read it), and every
        # section a reward declares is in the schema once, in registry order.
        keys = [cls.SECTION for cls in SECTIONS]
        assert all(REWARDS[key].section is cls for key, cls in zip(keys, SECTIONS, strict=True)), keys
        declared = [REWARDS[key].section for key in REWARDS if REWARDS[key].section is not None]
        assert list(SECTIONS) == list(dict.fromkeys(declared)) and len(set(keys)) == len(keys)

    def test_the_whole_file_is_the_rewards_schema_and_the_loops_sections(self) -> None:
        assert RUN_SCHEMA.shared is config_schema().shared is SharedConfig
        assert RUN_SCHEMA.sections == (*SECTIONS, UserSimConfig, RolloutLimits, DiagnosticsLimits)
        # What the rewards accept as any mapping is exactly what the loop declares.
        assert (
            list(config_schema().reserved)
            == [c.SECTION for c in LOOP_SECTIONS]
            == ["user_sim", "rollout", "diagnostics"]
        )
        assert not RUN_SCHEMA.reserved

    @pytest.mark.parametrize("cls", [SharedConfig, *SECTIONS, *LOOP_SECTIONS], ids=lambda c: c.__name__)
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
        run = load_run_config()
        assert (run.user_sim, run.rollout, run.schema) == (UserSimConfig(), RolloutLimits(), "zh")

    def test_each_reward_reads_its_own_section(self) -> None:
        cfg = load_config({"rewrite_similarity": {"alpha": 0.25}, "think_length": {"max": 99}})
        assert cfg.section(RewriteSimilarityConfig).alpha == 0.25
        assert cfg.section(ThinkLengthConfig).max == 99
        assert load_section(RewriteSimilarityConfig, {"rewrite_similarity": {"alpha": 0.75}}).alpha == 0.75
        assert load_section(TaskCompletionConfig).require_outputs is True

    def test_only_declared_names_read(self) -> None:
        cfg = load_config({"rewrite_similarity": {"alpha": 0.7}})
        with pytest.raises(AttributeError, match=r"'rewrite_similarity' section has not been read: use cfg\.section"):
            cfg.rewrite_similarity  # noqa: B018 (a section is built when first read, by its class)
        assert cfg.section(RewriteSimilarityConfig).alpha == cfg.rewrite_similarity.alpha == 0.7
        with pytest.raises(AttributeError, match="no setting or section 'rewrite_alpha'"):
            cfg.rewrite_alpha  # noqa: B018 (the old flat names are gone)
        with pytest.raises(dataclasses.FrozenInstanceError):
            cfg.shared = SharedConfig()  # type: ignore[misc]

    def test_numbers_take_the_declared_type(self) -> None:
        # An integer for a float setting is a float (a simulator's fingerprint hashes it), and the reverse.
        assert load_run_config({"user_sim": {"timeout_s": 60, "temperature": 0}}).user_sim.temperature == 0.0
        assert type(load_run_config({"user_sim": {"timeout_s": 60}}).user_sim.timeout_s) is float
        assert type(rollout_limits({"max_turns": 4.0}, "x").max_turns) is int
        with pytest.raises(ConfigError, match=r"x: rollout\.max_turns: 4\.5 is not of type 'integer'"):
            rollout_limits({"max_turns": 4.5}, "x")

    def test_config_pickles(self) -> None:
        cfg = load_config({"think_quality": {"banned": ["x"]}})
        assert pickle.loads(pickle.dumps(cfg)) == cfg
        run = load_run_config({"rollout": {"max_turns": 3}})
        assert pickle.loads(pickle.dumps(run)) == run

    def test_a_schema_refuses_what_it_cannot_read(self) -> None:
        @dataclasses.dataclass(frozen=True)
        class Undocumented:
            x: int = 1

        with pytest.raises(TypeError, match=r"Undocumented\.x: declare it with setting"):
            config_section("u")(Undocumented)

        @config_section("think_length")
        @dataclasses.dataclass(frozen=True)
        class Again:
            """Another think_length."""

            x: int = setting(1, "x.")

        with pytest.raises(TypeError, match=r"\['think_length'\] are declared twice"):
            ConfigSchema(sections=(ThinkLengthConfig, Again))
        with pytest.raises(TypeError, match="needs @config_section"):
            ConfigSchema(sections=(SharedConfig,))


class TestDerivedValidation:
    @pytest.mark.parametrize("cls", [*SECTIONS, *LOOP_SECTIONS], ids=lambda c: c.SECTION)
    def test_unknown_key_names_the_valid_ones(self, cls: type) -> None:
        valid = sorted(f.name for f in dataclasses.fields(cls))
        with pytest.raises(
            ConfigError,
            match=rf"^overrides: {cls.SECTION}\.no_such_key: unknown key; valid keys here are {re.escape(str(valid))}$",
        ):
            RUN_SCHEMA.load({cls.SECTION: {"no_such_key": 1}})

    BOUNDED: ClassVar[list[tuple[str, dataclasses.Field[Any]]]] = [
        (f"{cls.SECTION}.{key}", f)
        for cls in (*SECTIONS, *LOOP_SECTIONS)
        for key, f in leaves(cls)
        if {"minimum", "maximum", "exclusiveMinimum"} & set(f.metadata["bounds"])
    ]

    @pytest.mark.parametrize(("key", "f"), BOUNDED, ids=[k for k, _ in BOUNDED])
    def test_ranges_come_from_the_declarations(self, key: str, f: dataclasses.Field[Any]) -> None:
        bounds = f.metadata["bounds"]
        low = bounds.get("minimum", bounds.get("exclusiveMinimum"))
        below = low - 1 if "minimum" in bounds else low
        with pytest.raises(ConfigError, match=rf"^overrides: {key}: .*expected"):
            RUN_SCHEMA.load(nested(key, below))
        if "maximum" in bounds:
            with pytest.raises(ConfigError, match=rf"^overrides: {key}: .*expected"):
                RUN_SCHEMA.load(nested(key, bounds["maximum"] + 1))

    ALL_LEAVES: ClassVar[list[str]] = [f"{c.SECTION}.{k}" for c in (*SECTIONS, *LOOP_SECTIONS) for k, _ in leaves(c)]

    @pytest.mark.parametrize("key", ALL_LEAVES)
    def test_types_come_from_the_declarations(self, key: str) -> None:
        # A value of no declared type fails, naming the key, the expected values and the meaning.
        with pytest.raises(ConfigError, match=rf"^overrides: {key}: .*expected .*\(default "):
            RUN_SCHEMA.load(nested(key, {"not": "this"}))

    def test_loop_sections_only_need_to_be_mappings_for_the_rewards(self) -> None:
        load_config({"user_sim": {"kind": "scripted", "anything": [1]}, "rollout": {"max_turns": 4}})
        with pytest.raises(ConfigError, match=r"overrides: rollout: "):
            load_config({"rollout": 3})
        # The loop checks them key by key, in the rewards' style.
        with pytest.raises(ConfigError, match=r"^overrides: user_sim\.anything: unknown key; valid keys here are"):
            load_run_config({"user_sim": {"kind": "scripted", "anything": [1]}})

    @pytest.mark.parametrize(
        ("raw", "message"),
        [
            ({"max_turns": 0}, r"rollout\.max_turns: 0 is less than the minimum of 1; expected integer >= 1 \(default"),
            ({"error_budget": True}, r"rollout\.error_budget: True is not of type 'integer'; expected integer >= 1"),
            ({"token_budget": "lots"}, r"rollout\.token_budget: 'lots' is not of type 'integer'"),
            ({"max_failed_share": 1.5}, r"rollout\.max_failed_share: .*expected number in \[0, 1\]"),
            ({"max_failed_share": float("nan")}, r"rollout\.max_failed_share: nan is not a finite number"),
            ({"max_turn": 3}, r"rollout\.max_turn: unknown key; valid keys here are \['env_servers', 'env_timeout_s'"),
            ([3], r"rollout: \[3\] is not of type 'object'; expected mapping of max_turns, token_budget"),
        ],
    )
    def test_rollout_names_file_and_dotted_key(self, raw: Any, message: str) -> None:
        with pytest.raises(ConfigError, match=rf"^cfg\.yaml: {message}"):
            rollout_limits(raw, "cfg.yaml")

    def test_rollout_defaults(self) -> None:
        assert rollout_limits(None, "x") == rollout_limits({}, "x") == RolloutLimits()
        assert rollout_limits({"max_turns": 4}, "x") == RolloutLimits(max_turns=4)
        assert RolloutLimits.max_turns == 30  # the class attribute is the default (runs.spec's --max-turns)
