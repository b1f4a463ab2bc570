"""``python -m judgetrain``: the ``judgetrain`` command. Docs: "reference/configuration.md", "reference/commands/index.md"."""

import sys

from judgetrain.cli import main

sys.exit(main())
