"""``python -m rewardkit.cli``: the ``rewardkit`` command."""

from rewardkit.cli import main

raise SystemExit(main())
