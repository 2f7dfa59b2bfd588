"""Figures as files: every report's figure (an evaluation, a comparison, the audit, the calibration, the chains'
summaries) is drawn and written here, so each gets the same backend, layout and resolution, fails the same way when
it cannot be drawn, and lands atomically with the run's other outputs.

matplotlib is imported inside :func:`pyplot` (Agg backend): importing this module costs nothing, and a command draws
without a display. :func:`png` returns a figure's PNG bytes, so a caller can draw before it replaces any output and
commit the bytes with its other outputs (``OutputSet.write_bytes``); :func:`write_png` writes them to one file. A
figure that cannot be drawn (a title with bad ``$...$`` math) raises :class:`PlotError` before anything is written.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rewardkit.errors import UserError
from rewardkit.files.outputs import OutputSet

DPI = 110


class PlotError(UserError, ValueError):
    """A figure that matplotlib cannot draw from the text it was given (a title, a run's file name)."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig: Any, what: str) -> bytes:
    """The figure as PNG bytes, laid out tight, then closed; text matplotlib cannot lay out (mathtext) is the
    caller's input at fault: :class:`PlotError` naming ``what``."""
    data = io.BytesIO()
    try:
        fig.tight_layout()
        fig.savefig(data, format="png", dpi=DPI)
    except ValueError as exc:  # mathtext: "ParseException ... Unknown symbol: \foo"
        raise PlotError(f"cannot draw {what} ({exc}); in a title, $...$ is math: write \\$ for a dollar sign") from None
    finally:
        pyplot().close(fig)
    return data.getvalue()


def write_png(data: bytes, path: str | Path, flag: str = "output") -> Path:
    """Write a figure's PNG bytes (:func:`png`) to ``path`` atomically: a failure leaves the file as it was.
    ``flag`` names the option that chose the path, in a message."""
    with OutputSet() as outputs:
        outputs.write_bytes(path, data, flag)
    return Path(path)
