"""Reward configuration: defaults in code, overridden by the YAML file named in
``$REWARDKIT_CONFIG``, validated once when a reward is constructed.

Validation uses a JSON Schema so that an unknown key, a wrong type or an
out-of-range value fails with the dotted key path and the allowed values.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

ENV_VAR = "REWARDKIT_CONFIG"

DEFAULTS: dict[str, Any] = {
    "schema": "zh",
    "schema_keys": None,
    "backend": "lexical",
    "embedding_model": None,
    "embedding_device": "cpu",
    "think_length": {"unit": "chars", "min": 50, "max": 300, "eps": None, "mode": "smooth"},
    "think_quality": {
        "banned": [],
        "banned_file": None,
        "repetition_ngram": 3,
        "min_distinct_ratio": 0.5,
    },
    "rewrite_similarity": {"alpha": 0.5, "cjk_units": "bigram"},
    "expert_match": {"fuzzy_threshold": 85.0},
    # false: MUA-RL's variant, 1 iff the final database is right (tau2 also requires the expected outputs said).
    "task_completion": {"require_outputs": True},
    "user_sim": {},
    "rollout": {},
    "plan_coverage": {
        "match_threshold": 0.5,
        "duplicate_threshold": 0.9,
        "cross_expert": 0.5,
        "weights": {"coverage": 0.4, "quality": 0.3, "diversity": 0.1, "dependency": 0.2},
    },
}

_num = {"type": "number"}
_unit_interval = {"type": "number", "minimum": 0, "maximum": 1}


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": props}


_SCHEMA = _obj(
    {
        "schema": {"type": "string", "minLength": 1},
        "schema_keys": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "properties": {k: {"type": "string"} for k in ("rewrite", "plan", "expert", "tasks")},
        },
        "backend": {"enum": ["lexical", "embedding"]},
        "embedding_model": {"type": ["string", "null"]},
        "embedding_device": {"type": "string", "minLength": 1},
        "think_length": _obj(
            {
                "unit": {"enum": ["chars", "tokens"]},
                "min": {"type": "integer", "minimum": 0},
                "max": {"type": "integer", "minimum": 0},
                "eps": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "mode": {"enum": ["reference", "smooth"]},
            }
        ),
        "think_quality": _obj(
            {
                "banned": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "banned_file": {"type": ["string", "null"]},
                "repetition_ngram": {"type": "integer", "minimum": 1},
                "min_distinct_ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            }
        ),
        "rewrite_similarity": _obj({"alpha": _unit_interval, "cjk_units": {"enum": ["char", "bigram"]}}),
        "expert_match": _obj({"fuzzy_threshold": {"type": "number", "minimum": 0, "maximum": 100}}),
        "task_completion": _obj({"require_outputs": {"type": "boolean"}}),
        # Sections of the multi-turn rollout plugins; they validate their own keys when built.
        "user_sim": {"type": "object"},
        "rollout": {"type": "object"},
        "plan_coverage": _obj(
            {
                "match_threshold": _unit_interval,
                "duplicate_threshold": _unit_interval,
                "cross_expert": _unit_interval,
                "weights": _obj(
                    {k: {"type": "number", "minimum": 0} for k in ("coverage", "quality", "diversity", "dependency")}
                ),
            }
        ),
    }
)
_VALIDATOR = Draft202012Validator(_SCHEMA)


class ConfigError(ValueError):
    """A configuration value is unknown, mistyped or out of range."""


@dataclass(frozen=True)
class ThinkLengthConfig:
    unit: str
    min: int
    max: int
    eps: float | None
    mode: str


@dataclass(frozen=True)
class ThinkQualityConfig:
    banned: tuple[str, ...]
    banned_file: str | None
    repetition_ngram: int
    min_distinct_ratio: float


@dataclass(frozen=True)
class PlanCoverageConfig:
    match_threshold: float
    duplicate_threshold: float
    cross_expert: float
    weights: Mapping[str, float]


@dataclass(frozen=True)
class RewardConfig:
    schema: str
    schema_keys: Mapping[str, str] | None
    backend: str
    embedding_model: str | None
    embedding_device: str
    think_length: ThinkLengthConfig
    think_quality: ThinkQualityConfig
    rewrite_alpha: float
    rewrite_cjk_units: str
    fuzzy_threshold: float
    plan_coverage: PlanCoverageConfig
    require_outputs: bool = True


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _fail(source: str, key: str, message: str) -> ConfigError:
    return ConfigError(f"{source}: {key or '<root>'}: {message}")


def _non_finite(value: Any, path: tuple[str, ...] = (), seen: frozenset[int] = frozenset()) -> tuple[str, Any] | None:
    """The dotted key and value of the first NaN or infinity under ``value``, if any.

    JSON Schema's ``number`` admits NaN and infinities, and NaN passes every
    ``minimum``/``maximum`` (all comparisons are false): only this catches them.
    ``seen`` guards against YAML anchors that make a list contain itself.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return ".".join(path), value
    if id(value) in seen or not isinstance(value, (Mapping, list)):
        return None
    seen = seen | {id(value)}
    items = value.items() if isinstance(value, Mapping) else enumerate(value)
    for key, item in items:
        found = _non_finite(item, (*path, str(key)), seen)
        if found is not None:
            return found
    return None


def _validate(raw: Mapping[str, Any], source: str) -> None:
    bad = _non_finite(raw)
    if bad is not None:
        key, value = bad
        raise _fail(source, key, f"{value!r} is not a finite number; every numeric setting must be finite")
    for error in sorted(_VALIDATOR.iter_errors(raw), key=lambda e: list(map(str, e.absolute_path))):
        key = ".".join(map(str, error.absolute_path))
        if error.validator == "additionalProperties":
            allowed = sorted(error.schema.get("properties", {}))
            raise _fail(source, key, f"{error.message}; valid keys here are {allowed}")
        raise _fail(source, key, f"{error.message}; see DEFAULTS in rewardkit.rewards._config for the expected form")
    tl = raw.get("think_length", {})
    if tl.get("min", 0) > tl.get("max", float("inf")):
        raise _fail(source, "think_length.min", f"min ({tl['min']}) must be <= think_length.max ({tl['max']})")
    weights = raw.get("plan_coverage", {}).get("weights", {})
    if weights and sum(weights.values()) <= 0:
        raise _fail(source, "plan_coverage.weights", "at least one weight must be > 0")
    if raw.get("backend") == "embedding" and not raw.get("embedding_model"):
        raise _fail(source, "embedding_model", "backend 'embedding' needs a local sentence-transformers model path")


def _read_yaml(file: Path, name: str) -> Any:
    """The YAML in ``file``; every way of failing is a ConfigError naming ``name`` (and the line, for syntax)."""
    if file.is_dir():
        raise ConfigError(f"{name}: is a directory; point it at a YAML file")
    if not file.is_file():
        raise ConfigError(f"{name}: file not found; point it at a YAML file or unset it")
    try:
        text = file.read_text(encoding="utf-8-sig")  # -sig: a leading BOM is not part of the YAML
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{name}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}); save it as UTF-8"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read ({exc.strerror or exc}); check its permissions") from exc
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(f"{name}: invalid YAML at {at}{exc.problem or exc.context}") from exc
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # ValueError: a date such as 2020-13-01
        raise ConfigError(f"{name}: invalid YAML: {exc}") from exc


def read_config_file(path: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], str]:
    """The YAML mapping in ``path`` (default: ``$REWARDKIT_CONFIG``; ``{}`` if unset) and its name for messages."""
    from_env = path is None
    path = path if path is not None else os.environ.get(ENV_VAR) or None
    if path is None:
        return {}, "config"
    loaded = _read_yaml(Path(path), f"{ENV_VAR}={path!s}" if from_env else str(path))
    if loaded is None:  # an empty file (or only comments) means "all defaults"
        return {}, str(path)
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping of config keys; got {type(loaded).__name__}")
    return dict(loaded), str(path)


def load_config(overrides: Mapping[str, Any] | None = None, path: str | os.PathLike[str] | None = None) -> RewardConfig:
    """Defaults <- YAML file (``path`` or ``$REWARDKIT_CONFIG``) <- ``overrides``."""
    raw = DEFAULTS
    loaded, source = read_config_file(path)
    if loaded:
        _validate(loaded, source)
        raw = _merge(raw, loaded)
    if overrides:
        _validate(overrides, "overrides")
        raw = _merge(raw, overrides)
    _validate(raw, source)
    tl, tq, pc = raw["think_length"], raw["think_quality"], raw["plan_coverage"]
    return RewardConfig(
        schema=raw["schema"],
        schema_keys=raw["schema_keys"],
        backend=raw["backend"],
        embedding_model=raw["embedding_model"],
        embedding_device=raw["embedding_device"],
        think_length=ThinkLengthConfig(**tl),
        think_quality=ThinkQualityConfig(
            banned=tuple(tq["banned"]),
            banned_file=tq["banned_file"],
            repetition_ngram=tq["repetition_ngram"],
            min_distinct_ratio=tq["min_distinct_ratio"],
        ),
        rewrite_alpha=raw["rewrite_similarity"]["alpha"],
        rewrite_cjk_units=raw["rewrite_similarity"]["cjk_units"],
        fuzzy_threshold=raw["expert_match"]["fuzzy_threshold"],
        plan_coverage=PlanCoverageConfig(
            match_threshold=pc["match_threshold"],
            duplicate_threshold=pc["duplicate_threshold"],
            cross_expert=pc["cross_expert"],
            weights=dict(pc["weights"]),
        ),
        require_outputs=raw["task_completion"]["require_outputs"],
    )
