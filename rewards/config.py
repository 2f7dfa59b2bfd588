"""The rewards' configuration: the settings they share, and the loader that reads each reward's own section.

Each reward declares its ``<key>:`` section in its own file (``ThinkLengthConfig`` in ``rewards/think_length.py``)
and names it as ``section``; this module holds only what several rewards read: :class:`SharedConfig` (top-level
keys: the answer schema, the similarity backend, the agent rows' domain) and :class:`ExpertMatchConfig` (the
expert-name rule of ExpertMatch, PlanCoverage and every planning gold check). ``user_sim:`` and ``rollout:`` belong
to the multi-turn loop (``rewardkit.loop.config.RUN_SCHEMA``): here they only have to be mappings.

Values come from the defaults, then the YAML file named by ``$REWARDKIT_CONFIG`` (read and parsed once per process
and file version), then a reward's ``config=`` argument. :func:`load_config` checks the shared keys and the sections
it is given, at once and per source; every other top-level key must be a reward's (``rewards/_found.py``), and that
section is checked when a reward first reads it (``cfg.section(ThinkLengthConfig)``). The whole file at once is
:func:`rewardkit.rewards.registry.config_schema`, which ``register()``, ``rewardkit config check`` and ``lint`` use.
Code that must not depend on the environment (the data builders) builds its config with :meth:`RewardConfig.of`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Literal, TypeVar

from rewardkit.config import Config, ConfigError, ConfigSchema, config_section, setting
from rewardkit.config.values import merge
from rewardkit.rewards._found import reward_modules

S = TypeVar("S")

REFERENCE = "recipes/planning/reward_config.yaml"  # every key, its default and its meaning (generated)

# Sections of the multi-turn loop (a higher layer): accepted here as mappings; RUN_SCHEMA checks their keys.
LOOP_SECTIONS = {
    "user_sim": "the user simulator of multi-turn rollouts (see recipes/agent/mua_rl_config.yaml); "
    "its keys are checked by rewardkit.loop.user_sim.config.",
    "rollout": "when a multi-turn episode stops: turns, tokens, tool errors (see recipes/agent/mua_rl_config.yaml); "
    "its keys are checked by rewardkit.loop.config.",
    "diagnostics": "what the live GRPO diagnostics warn about or stop on; "
    "its keys are checked by rewardkit.loop.config.",
}


@dataclass(frozen=True)
class SharedConfig:
    """Top-level settings: the planning rewards' answer schema and similarity backend, and the agent rows' domain."""

    SECTION: ClassVar[str] = ""  # top level, not a section

    schema: str = setting(
        "zh",
        'Answer JSON: `zh` = {"补全后的问题", "plan": [{"专家", "处理问题", "depends_on"?}]}, `en`, '
        "or a JSON Schema file (which also needs `schema_keys`).",
        min_length=1,
    )
    schema_keys: Mapping[str, str] | None = setting(
        None,
        "For a JSON Schema file: the answer's field names, {rewrite, plan, expert, tasks}.",
        json_schema={
            "type": ["object", "null"],
            "additionalProperties": False,
            # rewardkit.rewards._schema.KEY_NAMES
            "properties": {k: {"type": "string"} for k in ("rewrite", "plan", "expert", "tasks")},
        },
    )
    backend: Literal["lexical", "embedding"] = setting(
        "lexical",
        "Similarity for RewriteSimilarity and PlanCoverage: `lexical` (rapidfuzz, no model) "
        "or `embedding` (sentence-transformers).",
    )
    embedding_model: str | None = setting(
        None,
        "Local sentence-transformers directory for `backend: embedding`; loaded once per process, "
        "outside DeepSpeed ZeRO-3 partitioning.",
    )
    embedding_device: str = setting("cpu", "Device of the embedding model.", min_length=1)
    domain: str | None = setting(
        None,
        "A domain every process loads before it reads a row (a built-in name, an installed package's entry point "
        "or the absolute path of a domain's folder or module), so that rows may name it by its name; "
        "`recipe run agent` writes it.",
        min_length=1,
    )

    @staticmethod
    def check(raw: Mapping[str, Any]) -> tuple[str, str] | None:
        if raw.get("backend") == "embedding" and not raw.get("embedding_model"):
            return "embedding_model", "backend 'embedding' needs a local sentence-transformers model path"
        return None


@config_section("expert_match")
@dataclass(frozen=True)
class ExpertMatchConfig:
    """Expert-name matching, shared by ExpertMatch, PlanCoverage and every planning reward's gold check."""

    fuzzy_threshold: float = setting(
        85.0,
        "rapidfuzz ratio at or above which a name that is not an exact match (after NFKC, whitespace removal "
        "and casefolding) maps onto the row's `experts` list.",
        minimum=0,
        maximum=100,
    )


@dataclass(frozen=True)
class RewardConfig(Config):
    """The shared settings plus the sections read so far: ``cfg.section(ThinkLengthConfig)`` is a reward's section,
    typed, checked and built on first read; the shared settings read as attributes (``cfg.schema``)."""

    # The sources in order, (name for messages, mapping): the file's, then the overrides; for the unread sections.
    sources: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    def section(self, cls: type[S]) -> S:
        key = cls.SECTION  # type: ignore[attr-defined]
        if key not in self.sections:
            schema, merged = _schema((cls,)), {}
            for source, raw in self.sources:  # each source checked on its own, so a message names the right one
                if key in raw:
                    schema.validate({key: raw[key]}, source)
                    merged = merge(merged, raw[key])
            name = " + ".join(source for source, raw in self.sources if key in raw) or "config"
            self.sections[key] = schema.section(cls, merged, name)  # type: ignore[index]  # a dict, filled once
        return super().section(cls)

    def __getattr__(self, name: str) -> Any:
        if name in reward_modules() and name not in self.__dict__.get("sections", {}):
            raise AttributeError(
                f"the {name!r} section has not been read: use cfg.section(<its class>), which checks and builds it"
            )
        return super().__getattr__(name)

    @classmethod
    def of(cls, *parts: Any) -> RewardConfig:
        """The defaults with whole sections replaced by ``parts`` (instances of SharedConfig or of a section class),
        checked like a file; never reads ``$REWARDKIT_CONFIG``."""
        own = tuple(dict.fromkeys(type(p) for p in parts if not isinstance(p, SharedConfig)))
        return _schema(own).of(*parts)


@cache
def _schema(sections: tuple[type, ...]) -> ConfigSchema:
    """The shared settings and ``sections``, checked in full; any other reward's key and the loop's only as
    mappings (their reward checks them when it reads them)."""
    own = {cls.SECTION for cls in sections}  # type: ignore[attr-defined]
    others = {key: f"the {key!r} reward's section" for key in reward_modules() if key not in own}
    return ConfigSchema(
        shared=SharedConfig,
        sections=sections,
        reserved={**others, **LOOP_SECTIONS},
        reference=REFERENCE,
        config_class=RewardConfig,
    )


def load_config(
    overrides: Mapping[str, Any] | None = None,
    path: str | os.PathLike[str] | None = None,
    sections: Sequence[type] = (),
) -> RewardConfig:
    """Defaults <- YAML file (``path`` or ``$REWARDKIT_CONFIG``) <- ``overrides``; the shared keys and ``sections``
    checked at each step, the other sections when first read."""
    schema = _schema(tuple(dict.fromkeys(sections)))
    layers = schema.layers(overrides, path)  # the file read once: for the sections now and those read later
    return dataclasses.replace(schema.load_layers(layers), sources=tuple(layers))


def load_section(cls: type[S], config: RewardConfig | Mapping[str, Any] | None = None) -> S:
    """One section: of ``config`` if it is a RewardConfig, else of ``load_config(config)``."""
    if isinstance(config, RewardConfig):
        return config.section(cls)
    return load_config(config, sections=(cls,)).section(cls)


__all__ = [
    "LOOP_SECTIONS",
    "REFERENCE",
    "ConfigError",
    "ExpertMatchConfig",
    "RewardConfig",
    "SharedConfig",
    "load_config",
    "load_section",
]
