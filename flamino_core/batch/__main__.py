"""``python -m flamino_core.batch embed|score ...``: the same as ``flamino batch ...``."""

import sys

from ..cli import main

sys.exit(main(["batch", *sys.argv[1:]]))
