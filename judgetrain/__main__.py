"""``python -m judgetrain``: the ``judgetrain`` command. README: "Commands"."""

import sys

from judgetrain.cli import main

sys.exit(main())
