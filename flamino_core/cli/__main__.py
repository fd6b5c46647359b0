"""``python -m flamino_core.cli``: the same as the ``flamino`` command."""

import sys

from . import main

sys.exit(main())
