"""``python -m flamino_core.cli``: the same as the ``flamino`` command."""

from flamino_core.cli import run

run()
