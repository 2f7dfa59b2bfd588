"""Similarity backends: ``lexical`` (rapidfuzz, no model) and ``embedding``
(sentence-transformers from a local path).

A reward opens one ``session`` per batch with every text it will compare, so
the embedding backend encodes each unique text once, in a single call.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
from rapidfuzz import fuzz, process

from rewardkit.config import ConfigError
from rewardkit.rewards._text import normalize_text
from rewardkit.rewards.config import SharedConfig

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sentence_transformers import SentenceTransformer


class Session(Protocol):
    def matrix(self, a: Sequence[str], b: Sequence[str]) -> list[list[float]]:
        """Similarities in [0, 1]: ``len(a)`` rows of ``len(b)`` (lists: a plan's matrix is small, read value by
        value)."""
        ...

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """The similarity of each ``a[i]`` to its ``b[i]``: the diagonal of ``matrix(a, b)``, shape (len(a),)."""
        ...


class Backend(Protocol):
    def session(self, texts: Iterable[str]) -> Session: ...


class LexicalBackend:
    """Normalised Levenshtein ratio (rapidfuzz ``fuzz.ratio``), works on CJK too."""

    def session(self, texts: Iterable[str]) -> _LexicalSession:
        return _LexicalSession({t: normalize_text(t) for t in dict.fromkeys(texts)})


_LOOP_PAIRS = 64  # up to this many pairs, one fuzz.ratio call each costs less than one cdist call


class _LexicalSession:
    """One batch's texts, each normalised once (a text the session was not given is normalised when asked for)."""

    def __init__(self, normalized: dict[str, str]) -> None:
        self._normalized = normalized

    def _norm(self, texts: Sequence[str]) -> list[str]:
        known = self._normalized
        return [known[t] if t in known else normalize_text(t) for t in texts]

    def matrix(self, a: Sequence[str], b: Sequence[str]) -> list[list[float]]:
        if not a or not b:
            return [[] for _ in a]
        na, nb = self._norm(a), self._norm(b)
        if len(na) * len(nb) <= _LOOP_PAIRS:  # the float32 scores cdist would give ("f": C's float), no numpy set-up
            return [[v / 100.0 for v in array("f", [fuzz.ratio(x, y) for y in nb]).tolist()] for x in na]
        scores = process.cdist(na, nb, scorer=fuzz.ratio, dtype=np.float32)
        return (scores.astype(np.float64) / 100.0).tolist()  # type: ignore[no-any-return]

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        if not a:
            return np.zeros(0, dtype=np.float64)
        scores = process.cpdist(self._norm(a), self._norm(b), scorer=fuzz.ratio, dtype=np.float32)
        return scores.astype(np.float64) / 100.0  # the same float32 scores as matrix's, scaled the same way


_MODELS: dict[tuple[str, str], SentenceTransformer] = {}
_MODELS_LOCK = threading.Lock()


@contextmanager
def _outside_zero3() -> Iterator[None]:
    # Under DeepSpeed ZeRO-3, transformers partitions every model built while
    # its global HfDeepSpeedConfig is alive (ms-swift issue 4580): hide it.
    from transformers.integrations import deepspeed as hf_ds

    saved = getattr(hf_ds, "_hf_deepspeed_config_weak_ref", None)
    hf_ds._hf_deepspeed_config_weak_ref = None
    try:
        yield
    finally:
        hf_ds._hf_deepspeed_config_weak_ref = saved


def load_sentence_model(path: str, device: str = "cpu") -> SentenceTransformer:
    """Load a local sentence-transformers model once per process and device."""
    key = (str(Path(path).resolve()), device)
    with _MODELS_LOCK:
        if key not in _MODELS:
            if not Path(path).exists():
                raise ConfigError(
                    f"embedding_model: {path!r} does not exist; give a local sentence-transformers "
                    "model directory (nothing is downloaded at run time)"
                )
            from sentence_transformers import SentenceTransformer

            with _outside_zero3():
                _MODELS[key] = SentenceTransformer(path, device=device, local_files_only=True)
        return _MODELS[key]


class _EmbeddingSession:
    def __init__(self, vectors: np.ndarray, index: dict[str, int]) -> None:
        self._vectors = vectors
        self._index = index

    def matrix(self, a: Sequence[str], b: Sequence[str]) -> list[list[float]]:
        return self._matrix(a, b).tolist()  # type: ignore[no-any-return]

    def _matrix(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        if not a or not b:
            return np.zeros((len(a), len(b)), dtype=np.float64)
        va = self._vectors[[self._index[x] for x in a]]
        vb = self._vectors[[self._index[x] for x in b]]
        # Normalised embeddings: the dot product is the cosine; negatives mean "unrelated".
        return np.clip(va @ vb.T, 0.0, 1.0).astype(np.float64)

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        # One 1x1 product per pair, as matrix() computes it: a batched product may round differently.
        return np.array([self._matrix([x], [y])[0, 0] for x, y in zip(a, b, strict=True)], dtype=np.float64)


class EmbeddingBackend:
    """Cosine similarity of sentence-transformers embeddings."""

    def __init__(self, model_path: str, device: str = "cpu") -> None:
        self.model_path = model_path
        self.device = device
        load_sentence_model(model_path, device)  # fail at construction, not mid-training

    def session(self, texts: Iterable[str]) -> _EmbeddingSession:
        unique = list(dict.fromkeys(texts))
        model = load_sentence_model(self.model_path, self.device)
        if unique:
            vectors = model.encode(unique, normalize_embeddings=True, convert_to_numpy=True)
        else:
            vectors = np.zeros((0, 1), dtype=np.float32)
        return _EmbeddingSession(np.asarray(vectors), {t: i for i, t in enumerate(unique)})


def make_backend(name: str, model_path: str | None, device: str = "cpu") -> Backend:
    if name == "lexical":
        return LexicalBackend()
    if not model_path:
        raise ConfigError("embedding_model: backend 'embedding' needs a local model path")
    return EmbeddingBackend(model_path, device)


def backend_for(shared: SharedConfig) -> Backend:
    """The backend the top-level ``backend``, ``embedding_model`` and ``embedding_device`` settings name."""
    return make_backend(shared.backend, shared.embedding_model, shared.embedding_device)
