"""``rewardkit view LOG``: an episode log as one self-contained HTML page (no server, no network).

``add_parsers(sub)`` adds ``view``; its handler is ``cmd_view``. ``LOG`` is an ``eval agent`` output folder or its
``episodes.jsonl`` (the domain comes from the ``summary.json`` beside it), any other episode log, such as ``synth
agent``'s ``--episodes`` file (then ``--domain`` names the domain: such a log records none), or a ``swift rlhf``
output folder (its completions, each group a task and each completion a trial with its rewards). ``--review`` adds
verdicts (buttons, or the keys ``a`` and ``r``), kept in the browser across reloads and saved as ``verdicts.json``
for ``synth agent --verdicts``. ``--out`` is none of the files it reads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rewardkit.cli.env import DOMAIN_HELP


def add_parsers(sub: argparse._SubParsersAction) -> None:
    view = sub.add_parser(
        "view", help="an episode log as one HTML page: why each scored what it did, search, transcripts"
    )
    view.add_argument("log", type=Path, help="an eval agent --out-dir, or an episode log (synth --episodes)")
    view.add_argument("--domain", help=DOMAIN_HELP + " (default: the one an eval's summary.json records)")
    view.add_argument("--out", type=Path, metavar="PAGE.html", help="the page (default: LOG's folder, view.html)")
    view.add_argument(
        "--review",
        action="store_true",
        help="accept/reject by key or button, kept across reloads, saved as a verdicts file",
    )
    view.add_argument("--title", help="the page's title (default: the log's path)")
    view.set_defaults(func=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    from rewardkit.files.outputs import check_outputs
    from rewardkit.runs.training.audit import find_run, load_run, run_inputs
    from rewardkit.runs.viewer.page import build, build_grpo, log_domain, read_log

    if args.log.is_dir() and not (args.log / "episodes.jsonl").is_file():  # a swift rlhf output folder
        run = find_run(args.log)
        out = args.out if args.out is not None else run / "view.html"
        check_outputs(run_inputs(run), [("--out", out)])
        return _write(out, build_grpo(load_run(run), args.title or str(run)))
    log = args.log / "episodes.jsonl" if args.log.is_dir() else args.log
    out = args.out if args.out is not None else log.parent / "view.html"
    domain = log_domain(log, args.domain)
    inputs = [("LOG", log), ("the eval's summary", log.parent / "summary.json"), *domain.input_files()]
    check_outputs(inputs, [("--out", out)])
    return _write(out, build(read_log(log), domain, args.title or str(log), args.review))


def _write(out: Path, view: dict) -> int:
    from rewardkit.files.outputs import OutputSet
    from rewardkit.runs.viewer.page import render

    with OutputSet(durable=False) as outputs:  # the page is the log's: rebuilt from it, never its only copy
        outputs.write_bytes(out, render(view), "--out")
    s = view["summary"]
    what, of = ("completions", "groups") if view["domain"] == "grpo" else ("episodes", "tasks")
    print(f"{out}: {s['episodes']} {what} of {s['tasks']} {of}, {s['passed']} passed, {s['excluded']} excluded")
    return 0
