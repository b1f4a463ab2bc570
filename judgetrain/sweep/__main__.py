"""``python -m judgetrain.sweep --config RECIPE [--field value …]``: one trial's training process,
as a sweep controller launches it (``accelerate launch -m judgetrain.sweep``): ``judgetrain.train``
with the trial's callback (:func:`judgetrain.sweep.trial.trial_main`).
Docs: "how-to/sweeps.md".
"""

import sys

from judgetrain.sweep.trial import trial_main

sys.exit(trial_main())
