"""``rewardkit view LOG``: an episode log as one self-contained HTML page (no server, no network).

``add_parsers(sub)`` adds ``view``; its handler is ``cmd_view``. ``LOG`` is an ``eval agent`` output folder (its
``episodes.jsonl``; the domain comes from its ``summary.json``), any episode log, such as ``synth agent``'s
``--episodes`` file (then ``--domain`` names the domain), or a ``swift rlhf`` output folder (its completions, each
group a task and each completion a trial with its rewards). ``--review`` adds accept/reject buttons to each
trajectory and a button that saves them as ``verdicts.json``, for ``synth agent --verdicts``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rewardkit.cli.env import DOMAIN_HELP


def add_parsers(sub: argparse._SubParsersAction) -> None:
    view = sub.add_parser("view", help="an episode log as one HTML page: transcripts, database diffs, filters")
    view.add_argument("log", type=Path, help="an eval agent --out-dir, or an episode log (synth --episodes)")
    view.add_argument("--domain", help=DOMAIN_HELP + " (default: the eval summary's, else retail)")
    view.add_argument("--out", type=Path, metavar="PAGE.html", help="the page (default: LOG's folder, view.html)")
    view.add_argument("--review", action="store_true", help="accept/reject buttons, saved as a verdicts file")
    view.add_argument("--title", help="the page's title (default: the log's path)")
    view.set_defaults(func=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    from rewardkit.envs import get_domain
    from rewardkit.files.jsonl import read_jsonl
    from rewardkit.files.outputs import check_outputs
    from rewardkit.runs.audit import find_run, load_run
    from rewardkit.runs.viewer import build, build_grpo

    if args.log.is_dir() and not (args.log / "episodes.jsonl").is_file():  # a swift rlhf output folder
        run = find_run(args.log)
        out = args.out if args.out is not None else run / "view.html"
        check_outputs([("LOG", run / "completions.jsonl")], [("--out", out)])
        return _write(out, build_grpo(load_run(run), args.title or str(run)))
    folder = args.log if args.log.is_dir() else args.log.parent
    log = args.log / "episodes.jsonl" if args.log.is_dir() else args.log
    summary = folder / "summary.json"
    domain = args.domain
    if domain is None and args.log.is_dir() and summary.is_file():
        domain = json.loads(summary.read_text(encoding="utf-8")).get("domain")
    out = args.out if args.out is not None else folder / "view.html"
    check_outputs([("LOG", log)], [("--out", out)])
    view = build(list(read_jsonl(log)), get_domain(domain or "retail"), args.title or str(log), args.review)
    return _write(out, view)


def _write(out: Path, view: dict) -> int:
    from rewardkit.files.outputs import OutputSet
    from rewardkit.runs.viewer import render

    with OutputSet() as outputs:
        outputs.write_text(out, render(view), "--out")
    s = view["summary"]
    what, of = ("completions", "groups") if view["domain"] == "grpo" else ("episodes", "tasks")
    print(f"{out}: {s['episodes']} {what} of {s['tasks']} {of}, {s['passed']} passed, {s['excluded']} excluded")
    return 0
