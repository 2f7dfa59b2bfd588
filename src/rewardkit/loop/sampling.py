"""Sampling that depends on a seed per row, not on the batch: the same (task, trial, turn) draws the same noise.

Sampling at temperature ``T`` is taking ``argmax(logits / T + g)`` with ``g`` standard Gumbel noise (the
Gumbel-max trick: an exact draw from ``softmax(logits / T)``). Each row of a batch draws its noise from its own
generator, seeded by its request, so a row's tokens depend on its seed and its own logits only, not on which
other conversations share its batch. Two models evaluated with the same seeds meet the same random stream
(common random numbers): where their logits agree, they sample the same tokens.

Generation itself stays greedy (ms-swift's engine at temperature 0); :class:`SeededGumbel` is the logits
processor that turns it into sampling. The whole vocabulary takes part (no top-k or top-p).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
from transformers import LogitsProcessor


class SeededGumbel(LogitsProcessor):
    """``scores / temperature`` plus standard Gumbel noise from one generator per row (``seeds[i]``; None: a
    seed of its own, drawn at random)."""

    def __init__(self, seeds: Sequence[int | None], temperature: float) -> None:
        if not temperature > 0:
            raise ValueError(f"SeededGumbel needs a temperature > 0, got {temperature!r}; 0 is greedy decoding")
        self.temperature = float(temperature)
        self.generators = [torch.Generator().manual_seed(random.getrandbits(63) if s is None else s) for s in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if scores.shape[0] != len(self.generators):
            raise ValueError(f"SeededGumbel: {scores.shape[0]} rows of scores for {len(self.generators)} seeds")
        vocab = scores.shape[-1]
        uniform = torch.stack([torch.rand(vocab, generator=g) for g in self.generators]).to(scores.device)
        # u = 0 gives -inf: that token is never drawn, as its probability of being drawn is 0 anyway.
        gumbel = -torch.log(-torch.log(uniform))
        return scores.float() / self.temperature + gumbel
