"""Prompt rendering, history windows and input mixing for the planning builders."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any, TypeVar

from rewardkit.data_builders._io import BuildError, BuildReport, OnError, Record
from rewardkit.recipes import recipe_path

T = TypeVar("T")
ROLE_NAMES = {"user": "用户", "assistant": "助手"}
PLACEHOLDERS = frozenset({"experts", "extras", "history"})


@dataclass(frozen=True)
class BuildOptions:
    """Options every planning builder takes (the CLI's shared flags)."""

    schema: str = "zh"
    no_think: bool = False
    history_turns: int = 3
    seed: int = 0
    on_error: OnError = "stop"
    prompt: str | None = None


@dataclass(frozen=True)
class InputSpec:
    path: Path
    ratio: float | None


def parse_input(spec: str) -> InputSpec:
    """``FILE`` or ``FILE:RATIO`` (the ratio is this input's share of the mix)."""
    head, sep, tail = spec.rpartition(":")
    if sep:
        try:
            ratio = float(tail)
        except ValueError:
            ratio = None
        if ratio is not None:
            if not (math.isfinite(ratio) and ratio >= 0):
                raise BuildError(f"--input {spec}: the ratio must be a finite number >= 0")
            return InputSpec(Path(head), ratio)
    return InputSpec(Path(spec), None)


class PromptTemplate:
    """The system prompt, read from a file under recipes/ (``$experts``, ``$extras``, ``$history``)."""

    def __init__(self, path: str | Path | None = None, *, no_think: bool = False, history_turns: int = 3) -> None:
        default = "planning/system_prompt_nothink.txt" if no_think else "planning/system_prompt.txt"
        self.path = Path(path) if path else recipe_path(default)
        try:
            self.template = Template(self.path.read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError) as exc:
            raise BuildError(f"prompt template {self.path}: {getattr(exc, 'strerror', None) or exc}") from None
        if history_turns < 0:
            raise BuildError("--history-turns must be >= 0")
        self.history_turns = history_turns
        # Checked once here, so that no record can fail at substitute() later.
        if not self.template.is_valid():
            raise BuildError(f"prompt template {self.path} has a malformed $ placeholder (write $$ for a literal $)")
        found = set(self.template.get_identifiers())
        if found - PLACEHOLDERS:
            raise BuildError(
                f"prompt template {self.path} has unknown placeholders {sorted(found - PLACEHOLDERS)}; "
                "it may use $experts, $extras and $history (write $$ for a literal $)"
            )
        missing = {"experts", "history"} - found
        if missing:
            raise BuildError(f"prompt template {self.path} lacks placeholders {sorted(missing)}")

    def render(self, record: Mapping[str, Any]) -> str:
        extras = ""
        if record.get("tools"):
            extras += "可用工具：" + "、".join(record["tools"]) + "\n"
        if record.get("products"):
            extras += "产品服务：" + "、".join(record["products"]) + "\n"
        return self.template.substitute(
            experts="、".join(record["experts"]),
            extras=extras,
            history=self.history(record.get("history") or []),
        )

    def history(self, messages: Sequence[Mapping[str, str]]) -> str:
        # A turn is one user message and the reply to it: keep the last N of them.
        window = list(messages)[-2 * self.history_turns :] if self.history_turns else []
        lines = [f"{ROLE_NAMES.get(m['role'], m['role'])}：{m['content']}" for m in window]
        return "\n".join(lines) or "无"

    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.render(record)}, {"role": "user", "content": record["query"]}]


def mix(groups: Sequence[Sequence[T]], ratios: Sequence[float | None], seed: int) -> tuple[list[T], list[T]]:
    """Sample the groups in the given proportions; returns (chosen, dropped).

    Without ratios every item is kept. With ratios, the largest mix that no
    group runs short of is drawn without replacement, then shuffled.
    """
    rng = random.Random(seed)
    if all(r is None for r in ratios):
        chosen = [x for g in groups for x in g]
        rng.shuffle(chosen)
        return chosen, []
    if any(r is None for r in ratios):
        raise BuildError("give a ratio for every --input (FILE:RATIO) or for none")
    weights = [float(r or 0.0) for r in ratios]
    total_w = sum(weights)
    if total_w <= 0:
        raise BuildError("at least one input ratio must be > 0")
    shares = [w / total_w for w in weights]
    size = min(len(g) / s for g, s in zip(groups, shares, strict=True) if s > 0)
    chosen, dropped = [], []
    for g, s in zip(groups, shares, strict=True):
        items = list(g)
        rng.shuffle(items)
        k = min(len(items), round(s * size))
        chosen += items[:k]
        dropped += items[k:]
    rng.shuffle(chosen)
    return chosen, dropped


def mix_and_count(
    groups: Sequence[Sequence[tuple[Record, T]]], inputs: Sequence[InputSpec], seed: int, report: BuildReport
) -> list[T]:
    """Mix the per-input survivors, count the mix's drops, and check the counts reconcile."""
    chosen, dropped = mix(groups, [s.ratio for s in inputs], seed)
    for record, _ in dropped:
        report.reject(record, "mix_downsampled")
    report.written = len(chosen)
    report.check()
    return [row for _, row in chosen]
