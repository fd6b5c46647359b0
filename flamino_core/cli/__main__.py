"""``python -m flamino_core.cli``: the same as the ``flamino`` command."""

from . import run

run()
