"""``python -m demo``: the demo's command line (``demo.cli``)."""

import sys

from demo.cli import main

sys.exit(main())
