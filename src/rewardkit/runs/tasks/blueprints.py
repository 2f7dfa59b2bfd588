"""Task blueprints sampled from a domain's tools and data, with no model: APIGen-MT's first stage done by rule.

APIGen-MT (Prabhakar et al., 2025, arXiv:2504.03601) samples chains of API calls whose arguments come from the
environment's data, then has a model word the user's request, and keeps a blueprint only once the gold replays.
:func:`sample_blueprint` is the model-free half: a write tool (the domain's writes in turn), each argument drawn from
the values the database holds under the same name (a number nudged off the value it found, a string taken as it is),
often preceded by a read that looks the row up first; the request is a plain sentence in the domain's language. It
gives ``rewardkit tasks generate --model sample`` blueprints in the same shape as a proposer model's, which then go
through the same checks on the real environment: a sampled key that is not there fails the gold, a value equal to the
one held changes nothing, the same chain twice is a duplicate.

>>> pools = value_pools({"books": [{"book_id": "b1", "copies": 2}, {"book_id": "b2", "copies": 0}]})
>>> sorted(pools["book_id"]), sorted(pools["copies"])
(['b1', 'b2'], [0, 2])
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs import Domain
from rewardkit.envs.tool import IDEMPOTENCY_KEY

_REQUEST = {
    "en": ("Please {what}: {args}.", "{name} {value}", ", "),
    "zh": ("请帮我{what}：{args}。", "{name} 为 {value}", "，"),
}
_NUDGES = (0.8, 0.9, 1.1, 1.25)


def value_pools(data: Any) -> dict[str, list[Any]]:
    """Every scalar the exported database holds, by the name it is held under (a column, or a nested key)."""
    pools: dict[str, set[Any]] = defaultdict(set)

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                if isinstance(inner, (str, int, float)) and not isinstance(inner, bool):
                    pools[str(key)].add(inner)
                else:
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(data)
    return {k: sorted(v, key=repr) for k, v in pools.items()}


def _argument(name: str, schema: Mapping[str, Any], pools: Mapping[str, Sequence[Any]], rng: random.Random) -> Any:
    """A value for one argument: an enum's member, else what the data holds under the name (numbers nudged, so that
    a write usually changes something), else a small number or a short text."""
    if "enum" in schema:
        return rng.choice(list(schema["enum"]))
    kind = schema.get("type")
    if kind == "array":  # one item, named as the data holds one of them ("item_ids" -> "item_id")
        return [_argument(name.removesuffix("s"), schema.get("items") or {}, pools, rng)]
    held = [v for v in pools.get(name, ()) if not (kind in ("number", "integer") and isinstance(v, str))]
    if kind in ("number", "integer"):
        base = rng.choice(held) if held else rng.randint(1, 50)
        value = base * rng.choice(_NUDGES) if isinstance(base, (int, float)) else rng.randint(1, 50)
        return max(1, round(value)) if kind == "integer" else round(max(value, 0.01), 1)
    if held:
        return rng.choice(held)
    return f"{name} {rng.randint(1, 99)}"


def _arguments(tool: Any, pools: Mapping[str, Sequence[Any]], rng: random.Random) -> dict[str, Any]:
    properties = tool.parameters.get("properties") or {}
    required = tool.parameters.get("required") or []
    return {k: _argument(k, properties[k], pools, rng) for k in required if k != IDEMPOTENCY_KEY}


def _lookup(domain: Domain, write: Mapping[str, Any], rng: random.Random) -> dict[str, Any] | None:
    """A read whose every required argument the write also has: looking the row up before changing it."""
    reads = []
    for tool in domain.tools.values():
        required = [k for k in tool.parameters.get("required") or [] if k != IDEMPOTENCY_KEY]
        if tool.risk == "read" and required and all(k in write["arguments"] for k in required):
            reads.append({"name": tool.name, "arguments": {k: write["arguments"][k] for k in required}})
    return rng.choice(reads) if reads else None


def sample_blueprint(domain: Domain, pools: Mapping[str, Sequence[Any]], index: int, seed: int) -> dict[str, Any]:
    """Blueprint ``index`` (deterministic in ``seed``): ``{"kind", "user_scenario", "actions", "outputs"}``, as a
    proposer model answers."""
    writes = sorted(name for name, tool in domain.tools.items() if tool.risk == "write")
    if not writes:
        raise ValueError(f"domain {domain.name!r} has no write tool: a sampled blueprint is a write")
    rng = random.Random(f"{seed}:{index}")
    tool = domain.tools[writes[index % len(writes)]]
    write = {"name": tool.name, "arguments": _arguments(tool, pools, rng)}
    lookup = _lookup(domain, write, rng) if rng.random() < 0.5 else None
    template, pair, sep = _REQUEST.get(domain.language, _REQUEST["en"])
    what = tool.description.strip().rstrip(".。").split("。")[0].split(". ")[0]
    said = sep.join(pair.format(name=k, value=v) for k, v in write["arguments"].items())
    reason = template.format(what=what[:1].lower() + what[1:] if domain.language == "en" else what, args=said)
    return {
        "kind": "plain",
        "user_scenario": {"reason_for_call": reason},
        "actions": [lookup, write] if lookup else [write],
        "outputs": [],
    }
