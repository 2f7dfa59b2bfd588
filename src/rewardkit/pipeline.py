"""A small resumable stage runner for the `rewardkit recipe run` pipelines.

Each stage writes ``<workdir>/.stages/<name>.json`` when it succeeds; a later
run skips stages that have that marker. ``--force STAGE`` reruns that stage and
every stage after it, since their inputs change.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rewardkit.tiny_model import offline_env


class StageError(RuntimeError):
    """A stage failed; the message names the stage and its log file."""


@dataclass
class Context:
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    echo: TextIO = sys.stdout
    results: dict[str, Any] = field(default_factory=dict)  # what earlier stages recorded

    def log_path(self, stage: str) -> Path:
        return self.workdir / "logs" / f"{stage}.log"

    def run(self, stage: str, cmd: Sequence[str], extra_env: Mapping[str, str] | None = None) -> None:
        """Run one command, print it first, stream its output to the terminal and the stage log."""
        log = self.log_path(stage)
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **offline_env(), **self.env, **(extra_env or {})}
        print(f"[{stage}] $ {shlex.join(cmd)}", file=self.echo, flush=True)
        with log.open("a", encoding="utf-8") as out:
            out.write(f"$ {shlex.join(cmd)}\n")
            proc = subprocess.Popen(
                list(cmd), cwd=self.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                if _progress(line):
                    print(f"[{stage}] {line.rstrip()[:200]}", file=self.echo, flush=True)
            code = proc.wait()
        if code != 0:
            raise StageError(f"stage {stage!r} failed (exit {code}); log: {log}")


def _progress(line: str) -> bool:
    # ms-swift logs one dict per logging step; errors should surface too.
    return line.startswith("{'loss'") or "'reward'" in line or "Error" in line or line.startswith("Traceback")


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Context], dict[str, Any]]  # returns what later stages need; saved in the marker


def run_stages(stages: Sequence[Stage], ctx: Context, force: Sequence[str] = ()) -> dict[str, Any]:
    names = [s.name for s in stages]
    unknown = sorted(set(force) - set(names))
    if unknown:
        raise ValueError(f"--force: unknown stage(s) {unknown}; stages are {names}")
    first_forced = min((names.index(f) for f in force), default=len(names))
    markers = ctx.workdir / ".stages"
    markers.mkdir(parents=True, exist_ok=True)
    for i, stage in enumerate(stages):
        marker = markers / f"{stage.name}.json"
        if marker.is_file() and i < first_forced:
            ctx.results[stage.name] = json.loads(marker.read_text())
            print(f"[{stage.name}] done earlier, skipped (--force {stage.name} to redo)", file=ctx.echo)
            continue
        marker.unlink(missing_ok=True)
        start = time.perf_counter()
        print(f"[{stage.name}] starting", file=ctx.echo, flush=True)
        result = stage.run(ctx)
        result["seconds"] = round(time.perf_counter() - start, 1)
        ctx.results[stage.name] = result
        marker.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
        print(f"[{stage.name}] finished in {result['seconds']}s", file=ctx.echo, flush=True)
    return ctx.results


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
