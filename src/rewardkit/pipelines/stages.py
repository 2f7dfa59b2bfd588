"""A small resumable stage runner for the `rewardkit recipe run` pipelines.

Each stage writes ``<workdir>/.stages/<name>.json`` when it succeeds and its
outputs pass the stage's check; a later run skips stages that have that marker
and whose outputs still pass. ``--force STAGE``, or a marked stage whose output
is broken now, reruns that stage and every stage after it, since their inputs change.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

from rewardkit.errors import UserError
from rewardkit.files.jsonl import dumps
from rewardkit.pipelines.tiny_model import offline_env

T = TypeVar("T")


SWIFT = str(Path(sys.executable).parent / "swift")  # the `swift` of this environment, whatever PATH says


class StageError(RuntimeError):
    """A stage failed; the message names the stage and its log file."""


class BrokenOutput(StageError):
    """A stage's output is missing or unreadable; the message says which file and why."""


class PipelineError(UserError, ValueError):
    """A bad option or --workdir: a user error, reported before any stage runs."""


def plugin_file(module: str) -> str:
    """The absolute path of ``module``'s file for ``--external_plugins``, found without importing it."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return str(Path(spec.origin).resolve())


def prepare_workdir(workdir: Path) -> None:
    """Create ``workdir`` and check it is a writable directory, before any stage spends minutes."""
    if workdir.exists() and not workdir.is_dir():
        raise PipelineError(f"--workdir {workdir} is a file, not a directory")
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        probe = workdir / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise PipelineError(f"--workdir {workdir} is not a writable directory ({exc.strerror or exc})") from None


@dataclass
class Context:
    workdir: Path
    echo: TextIO = sys.stdout
    results: dict[str, Any] = field(default_factory=dict)  # what earlier stages recorded

    def log_path(self, stage: str) -> Path:
        return self.workdir / "logs" / f"{stage}.log"

    def run(self, stage: str, cmd: Sequence[str], extra_env: Mapping[str, str] | None = None) -> None:
        """Run one command, print it first, stream its output to the terminal and the stage log."""
        log = self.log_path(stage)
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **offline_env(), **(extra_env or {})}
        print(f"[{stage}] $ {shlex.join(cmd)}", file=self.echo, flush=True)
        with log.open("a", encoding="utf-8") as out:
            out.write(f"$ {shlex.join(cmd)}\n")
            proc = subprocess.Popen(
                list(cmd), cwd=self.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                shown = progress_line(line)
                if shown is None and ("Error" in line or line.startswith("Traceback")):
                    shown = line.rstrip()  # a failure shows whole; the traceback is in the stage's log
                if shown is not None:
                    print(f"[{stage}] {shown}", file=self.echo, flush=True)
            code = proc.wait()
        if code != 0:
            raise StageError(f"stage {stage!r} failed (exit {code}); log: {log}")


def progress_line(line: str) -> str | None:
    """One of ms-swift's logged steps (a dict of strings, in whatever key order the callbacks left it) as one line a
    person can follow: the step of steps, the headline (GRPO's total reward, else the loss and token accuracy) and
    the time left; None for any other line. The full line stays in the stage's log.

    >>> progress_line("{'loss': '0.2079', 'token_acc': '0.966', 'global_step/max_steps': '60/80', "
    ...               "'elapsed_time': '33s', 'remaining_time': '11s'}")
    'step 60/80 · loss 0.2079 · token_acc 0.966 · 33s elapsed, 11s left'
    """
    text = line.strip()
    if not text.startswith("{") or "'global_step/max_steps'" not in text:
        return None
    try:
        row = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(row, dict):
        return None
    keys = ("reward",) if "reward" in row else ("loss", "token_acc")
    parts = [f"step {row['global_step/max_steps']}", *(f"{k} {row[k]}" for k in keys if k in row)]
    if "elapsed_time" in row and "remaining_time" in row:
        parts.append(f"{row['elapsed_time']} elapsed, {row['remaining_time']} left")
    return " · ".join(parts)


def _no_check(ctx: Context, result: Mapping[str, Any]) -> None:
    return None


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Context], dict[str, Any]]  # returns what later stages need; saved in the marker
    # Raises BrokenOutput unless the outputs named by the result are whole; runs before the marker is
    # written and again before a marker is trusted on a rerun.
    check: Callable[[Context, Mapping[str, Any]], None] = _no_check


def _read_marker(marker: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing, torn or not UTF-8: not done
        return None
    return data if isinstance(data, dict) else None


def _write_marker(marker: Path, result: Mapping[str, Any]) -> None:
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(dumps(result, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, marker)  # a marker is whole or absent, never torn


def run_stages(stages: Sequence[Stage], ctx: Context, force: Sequence[str] = ()) -> dict[str, Any]:
    names = [s.name for s in stages]
    unknown = sorted(set(force) - set(names))
    if unknown:
        raise PipelineError(f"--force: unknown stage(s) {unknown}; stages are {names}")
    first_redo = min((names.index(f) for f in force), default=len(names))
    markers = ctx.workdir / ".stages"
    markers.mkdir(parents=True, exist_ok=True)
    for i, stage in enumerate(stages):
        marker = markers / f"{stage.name}.json"
        if i < first_redo:
            earlier = _read_marker(marker)
            try:
                if earlier is not None:
                    stage.check(ctx, earlier)
                    ctx.results[stage.name] = earlier
                    print(f"[{stage.name}] done earlier, skipped (--force {stage.name} to redo)", file=ctx.echo)
                    continue
            except BrokenOutput as exc:
                print(
                    f"[{stage.name}] earlier output is broken ({exc}); redoing it and the stages after it",
                    file=ctx.echo,
                )
            first_redo = i  # the stages after it read its outputs: they are redone too
        marker.unlink(missing_ok=True)
        start = time.perf_counter()
        print(f"[{stage.name}] starting", file=ctx.echo, flush=True)
        result = stage.run(ctx)
        try:
            stage.check(ctx, result)
        except BrokenOutput as exc:
            raise StageError(f"stage {stage.name!r} finished but its output is broken: {exc}") from exc
        result["seconds"] = round(time.perf_counter() - start, 1)
        ctx.results[stage.name] = result
        _write_marker(marker, result)
        print(f"[{stage.name}] finished in {result['seconds']}s", file=ctx.echo, flush=True)
    return ctx.results


# -- output checks -------------------------------------------------------------------------------------------
def read_output(path: Path, read: Callable[[Path], T]) -> T:
    """``read(path)``, with a missing, unreadable or malformed file reported as BrokenOutput naming it."""
    try:
        return read(path)
    except (OSError, ValueError) as exc:
        raise BrokenOutput(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None


def check_jsonl(path: Path) -> int:
    """Raise BrokenOutput unless ``path`` is a readable JSONL file with at least one row; the row count."""
    from rewardkit.files.jsonl import read_jsonl

    rows = read_output(path, read_jsonl)
    if not rows:
        raise BrokenOutput(f"{path} has no rows")
    return len(rows)


def _check_weights(directory: Path) -> None:
    bins = [p for p in directory.glob("*.bin") if p.name != "training_args.bin"]  # that one is not weights
    weights = [*directory.glob("*.safetensors"), *bins]
    if not weights:
        raise BrokenOutput(f"no weights (*.safetensors, *.bin) in {directory}")
    for path in weights:
        if path.stat().st_size == 0:
            raise BrokenOutput(f"{path} is empty")
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            try:  # reads the header only: a torn file fails here
                with safe_open(str(path), framework="pt") as f:
                    f.keys()
            except Exception as exc:  # safetensors raises its own types; any failure means unloadable
                raise BrokenOutput(f"{path} does not load ({type(exc).__name__}: {exc})") from None


def check_checkpoint(path: Path) -> None:
    """A saved model (full or LoRA adapter): its config and non-empty, loadable weights."""
    if not path.is_dir():
        raise BrokenOutput(f"checkpoint {path} is missing")
    if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
        raise BrokenOutput(f"no config.json or adapter_config.json in {path}")
    _check_weights(path)


def check_model_dir(path: Path) -> int:
    """A full model with its tokenizer: config, weights and tokenizer load and agree; the vocabulary size."""
    check_checkpoint(path)
    from transformers import AutoConfig, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # transformers raises OSError, ValueError, JSON and tokenizers errors alike
        raise BrokenOutput(f"{path} does not load ({type(exc).__name__}: {_first(exc)})") from None
    if len(tokenizer) != config.vocab_size:
        raise BrokenOutput(f"{path}: tokenizer has {len(tokenizer)} tokens, config.json {config.vocab_size}")
    return len(tokenizer)


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def latest_run_dir(output_dir: Path) -> Path:
    """ms-swift writes into ``output_dir/v<N>-<timestamp>``; the newest one."""
    runs = sorted(output_dir.glob("v*-*"), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise StageError(f"no ms-swift run directory under {output_dir}")
    return runs[-1]


def last_checkpoint(output_dir: Path) -> Path:
    run = latest_run_dir(output_dir)
    ckpts = sorted(run.glob("checkpoint-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    if not ckpts:
        raise StageError(f"no checkpoint-* under {run}: did training save?")
    return ckpts[-1]


def run_sft(ctx: Context, recipe: Path, model: str, dataset: Path, steps: int | None = None) -> Path:
    """``swift sft RECIPE`` into ``WORKDIR/sft``; the checkpoint the next stage trains from.

    ``steps`` shortens the run (and saves at its end). A LoRA checkpoint is merged first
    (``swift export --merge_lora``) into ``WORKDIR/sft-merged``: GRPO starts from whole weights.
    """
    out = ctx.workdir / "sft"
    cmd = [SWIFT, "sft", str(recipe), "--model", model, "--dataset", str(dataset), "--output_dir", str(out)]
    if steps:
        cmd += ["--max_steps", str(steps), "--save_strategy", "steps", "--save_steps", str(steps)]
    ctx.run("sft", cmd)
    return merged(ctx, "sft", last_checkpoint(out))


def merged(ctx: Context, stage: str, checkpoint: Path) -> Path:
    """``checkpoint`` itself when it holds whole weights; a LoRA adapter is merged into its base model first
    (``swift export --merge_lora``) into ``WORKDIR/STAGE-merged``: what the next stage trains or evaluates."""
    if not (checkpoint / "adapter_config.json").is_file():
        return checkpoint
    out = ctx.workdir / f"{stage}-merged"
    ctx.run(stage, [SWIFT, "export", "--adapters", str(checkpoint), "--merge_lora", "true", "--output_dir", str(out)])
    return out
