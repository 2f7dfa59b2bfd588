"""Answer-JSON schema presets and the key mapping the rewards read through.

``zh`` is the merchant planner's answer format (Chinese field names); ``en`` is its English twin.
A custom JSON Schema file plus a key mapping supports any other naming.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from rewardkit.config import ConfigError
from rewardkit.rewards._schema_check import check_keys, check_references, dotted

DEPENDS_ON = "depends_on"


@dataclass(frozen=True, eq=False)  # identity hash: instances key the parse caches
class AnswerSchema:
    """A validator plus the names of the four fields the rewards read."""

    name: str
    schema: Mapping[str, Any]
    rewrite_key: str
    plan_key: str
    expert_key: str
    tasks_key: str
    validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            Draft202012Validator.check_schema(self.schema)
        except SchemaError as exc:
            at = dotted(exc.absolute_path)
            raise ConfigError(f"schema: {self.name}: not a valid JSON Schema at {at}: {exc.message}") from exc
        # References resolve now, never lazily at some completion (nor over the network).
        registry = check_references(self.name, self.schema)
        object.__setattr__(self, "validator", Draft202012Validator(self.schema, registry=registry))

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.rewrite_key, self.plan_key, self.expert_key, self.tasks_key)
        return (AnswerSchema, (self.name, self.schema, *fields))

    def is_valid(self, data: Mapping[str, Any]) -> bool:
        return bool(self.validator.is_valid(data))


def _preset_schema(rewrite: str, plan: str, expert: str, tasks: str) -> dict[str, Any]:
    step = {
        "type": "object",
        "required": [expert, tasks],
        "additionalProperties": False,
        "properties": {
            expert: {"type": "string", "minLength": 1},
            tasks: {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
            DEPENDS_ON: {"type": "array", "items": {"type": "integer", "minimum": 0}},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": [rewrite, plan],
        "additionalProperties": False,
        "properties": {rewrite: {"type": "string"}, plan: {"type": "array", "items": step}},
    }


_PRESET_KEYS = {
    "zh": ("补全后的问题", "plan", "专家", "处理问题"),
    "en": ("rewritten_query", "plan", "expert", "tasks"),
}
KEY_NAMES = ("rewrite", "plan", "expert", "tasks")


def load_schema(spec: str, keys: Mapping[str, str] | None = None) -> AnswerSchema:
    """Return the preset ``zh``/``en``, or load a JSON Schema file with ``keys``.

    ``keys`` maps rewrite/plan/expert/tasks to the field names in the custom
    schema. Results are shared per process so every reward hits one parse cache.
    """
    return _load_schema(spec, tuple(sorted((keys or {}).items())))


@lru_cache(maxsize=32)
def _load_schema(spec: str, key_items: tuple[tuple[str, str], ...]) -> AnswerSchema:
    keys = dict(key_items)
    if spec in _PRESET_KEYS:
        names = _PRESET_KEYS[spec]
        return AnswerSchema(spec, _preset_schema(*names), *names)
    path = Path(spec)
    if path.is_dir():
        raise ConfigError(f"schema: {spec!r} is a directory; give a JSON Schema file or a preset (zh, en)")
    if not path.is_file():
        raise ConfigError(f"schema: {spec!r} is neither a preset (zh, en) nor an existing JSON Schema file")
    missing = [k for k in KEY_NAMES if not keys.get(k)]
    if missing:
        raise ConfigError(
            f"schema_keys: a custom schema needs the field names for {missing}; "
            f"set schema_keys: {{rewrite: ..., plan: ..., expert: ..., tasks: ...}}"
        )
    answer = AnswerSchema(str(path), _read_json(path), *(keys[k] for k in KEY_NAMES))
    check_keys(answer.name, answer.schema, keys)
    return answer


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"schema: {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON") from exc
    except OSError as exc:
        raise ConfigError(f"schema: {path}: cannot be read ({exc.strerror or exc}); check its permissions") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"schema: {path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"schema: {path}: not usable JSON ({type(exc).__name__}: {str(exc)[:200]})") from exc
