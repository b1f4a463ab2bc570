"""``python -m judgetrain.models.tiny --out DIR [--family NAME …]``: build tiny checkpoints.
README: "Models".
"""

import sys

from judgetrain.models.tiny.builder import main

sys.exit(main())
