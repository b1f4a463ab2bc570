"""``python -m judgetrain.train --config RECIPE [--field value …]``: the training process that
``accelerate launch`` (and ``judgetrain train``) starts in every rank.
Docs: "reference/recipes.md".
"""

import sys

from judgetrain.train.run import script

sys.exit(script())
