"""``python -m judgetrain.models.tiny --out DIR [--family NAME …]``: build tiny checkpoints.
Docs: "reference/api/registry.md".
"""

import sys

from judgetrain.noise import quiet_libraries

quiet_libraries()  # before transformers loads

from judgetrain.models.tiny.builder import main  # noqa: E402

sys.exit(main())
