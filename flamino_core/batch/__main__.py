"""``python -m flamino_core.batch embed|score ...``: the same as ``flamino batch ...``."""

import sys

from flamino_core.cli import main

sys.exit(main(["batch", *sys.argv[1:]]))
