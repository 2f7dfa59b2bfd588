"""Sampling as GRPO's rollouts sample, and seeded per row: the same (task, trial, turn) draws the same noise.

A sampled evaluation measures the policy GRPO trained only when it draws tokens the way GRPO's rollouts drew them:
the same temperature, the same top-k and top-p. :func:`rollout_sampling` reads them from a GRPO recipe the way
ms-swift does, including one rule that is easy to miss: on the transformers engine (``use_vllm: false``) ms-swift
turns an unset ``top_k`` (``-1``, its default) into None, which the model's ``generation_config.json`` then fills
(Qwen3 ships 20), or else transformers' own default, 50. So a CPU GRPO run samples from the 20 or 50 likeliest
tokens, while vLLM with the same recipe samples from all of them.

Drawing is the Gumbel-max trick: warp the logits as transformers does (temperature, then top-k, then top-p), add
standard Gumbel noise ``g`` and take ``argmax(warped + g)``: an exact draw from ``softmax(warped)``. Each row of a
batch draws its noise from its own generator, seeded by its request, so a row's tokens depend on its seed and its
own logits only, not on which other conversations share its batch. Two models evaluated with the same seeds meet
the same random stream (common random numbers): where their logits agree, they sample the same tokens.

Generation itself stays greedy (ms-swift's engine at temperature 0); :class:`SeededSampler` is the logits
processor that turns it into sampling.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# transformers' own default top-k, which it applies when a sampling call leaves top_k unset
# (GenerationConfig._get_default_generation_params); tests/test_sampling.py checks it against the installed one.
TRANSFORMERS_TOP_K = 50


@dataclass(frozen=True)
class Sampling:
    """How a policy's next token is drawn: ``temperature`` 0 is greedy; ``top_k`` None keeps every token."""

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float = 1.0

    def __post_init__(self) -> None:
        found = problem(self.temperature, self.top_k, self.top_p)
        if found is not None:
            raise ValueError(f"{found[0]} {found[1]}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def params(self) -> dict[str, Any]:
        """The request fields of an OpenAI-compatible endpoint (``top_k`` is vLLM's and ms-swift's extension)."""
        out: dict[str, Any] = {"temperature": float(self.temperature)}
        out.update({"top_k": self.top_k} if self.top_k is not None else {})
        return out | ({"top_p": float(self.top_p)} if self.top_p < 1 else {})


def problem(temperature: Any, top_k: Any, top_p: Any) -> tuple[str, str] | None:
    """What is wrong with these sampling settings, as (field, what it must be), or None."""
    t, k, p = temperature, top_k, top_p
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and t >= 0):
        return "temperature", f"must be a finite number >= 0, got {t!r}"
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        return "top_k", f"must be a whole number >= 1 (or left out: every token), got {k!r}"
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        return "top_p", f"must be a number in (0, 1], got {p!r}"
    if t == 0 and (k is not None or p < 1):
        return "top_k" if k is not None else "top_p", "samples, and temperature 0 is greedy: give a temperature > 0"
    return None


GREEDY = Sampling()


def rollout_sampling(recipe: Mapping[str, Any], model: str | Path | None = None) -> Sampling:
    """How ms-swift's GRPO samples the rollouts of ``recipe`` (a GRPO YAML read as a mapping; a key left out takes
    ms-swift's default) from ``model`` (its directory: on the transformers engine an unset top_k takes the model's
    ``generation_config.json`` value before transformers' own): temperature, top-p, and top-k as the engine applies
    it (see the module docstring). A repetition penalty cannot be reproduced by the seeded sampler: refused."""
    from swift.arguments import RLHFArguments

    keys = ("temperature", "top_k", "top_p", "use_vllm", "repetition_penalty")
    defaults = {f.name: f.default for f in dataclasses.fields(RLHFArguments) if f.name in keys}
    args = {**defaults, **{k: recipe[k] for k in defaults if k in recipe}}
    if float(args["repetition_penalty"]) != 1:
        raise ValueError(
            f"repetition_penalty: {args['repetition_penalty']!r}; the evaluation samples without one, so "
            "it would not measure what GRPO trained: set repetition_penalty: 1.0 in the GRPO recipe"
        )
    top_k = int(args["top_k"]) if args["top_k"] is not None and int(args["top_k"]) > 0 else None
    if top_k is None and not args["use_vllm"]:
        top_k = _model_top_k(model) or TRANSFORMERS_TOP_K
    return Sampling(float(args["temperature"]), top_k, float(args["top_p"]))


def _model_top_k(model: str | Path | None) -> int | None:
    """The top_k of a local model's ``generation_config.json`` (a hub id or none: None)."""
    path = None if model is None else Path(model) / "generation_config.json"
    if path is None or not path.is_file():
        return None
    value = json.loads(path.read_text(encoding="utf-8")).get("top_k")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class SeededSampler:
    """A transformers logits processor: ``scores`` warped by ``sampling`` (temperature, top-k, top-p, with
    transformers' own warpers) plus standard Gumbel noise from one generator per row (``seeds[i]``; None: a seed of
    its own, drawn at random). Greedy decoding of its output is a draw from the warped distribution."""

    def __init__(self, seeds: Sequence[int | None], sampling: Sampling) -> None:
        import torch
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        if sampling.greedy:
            raise ValueError(f"SeededSampler needs a temperature > 0, got {sampling.temperature!r}; 0 is greedy")
        self.warpers = [TemperatureLogitsWarper(float(sampling.temperature))]
        self.warpers += [TopKLogitsWarper(sampling.top_k)] if sampling.top_k is not None else []
        self.warpers += [TopPLogitsWarper(sampling.top_p)] if sampling.top_p < 1 else []
        self.generators = [torch.Generator().manual_seed(random.getrandbits(63) if s is None else s) for s in seeds]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if scores.shape[0] != len(self.generators):
            raise ValueError(f"SeededSampler: {scores.shape[0]} rows of scores for {len(self.generators)} seeds")
        warped = scores.float()
        for warper in self.warpers:
            warped = warper(input_ids, warped)
        vocab = scores.shape[-1]
        uniform = torch.stack([torch.rand(vocab, generator=g) for g in self.generators]).to(scores.device)
        # u = 0 gives -inf: that token is never drawn, as its probability of being drawn is 0 anyway.
        return warped - torch.log(-torch.log(uniform))
