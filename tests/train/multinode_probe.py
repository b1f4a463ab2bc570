"""Test helper, run by ``accelerate launch`` in every process of a two-"node" launch
(tests/train/test_multinode.py): tests/train/ddp_probe.py's entrypoint (each rank's
trainable weights before training and after every step, and the distributed type) plus,
with ``PROBE_STEP_PAUSE=S`` in the environment, a pause of S seconds after every
optimizer step, so that a test can kill one node between two steps. Nothing here is
part of the library.

    accelerate launch … tests/train/multinode_probe.py PROBE_DIR --config RECIPE [overrides…]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def pause(seconds: float):
    from transformers import TrainerCallback

    class Pause(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            time.sleep(seconds)

    return Pause()


if __name__ == "__main__":
    from ddp_probe import probe  # beside this file: the script's folder is on sys.path

    from judgetrain.train import script

    folder, seconds = Path(sys.argv[1]), float(os.environ.get("PROBE_STEP_PAUSE", "0"))
    callbacks = [lambda evaluation, processor, args: probe(folder)]
    if seconds:
        callbacks.append(lambda evaluation, processor, args: pause(seconds))
    sys.exit(script(sys.argv[2:], callbacks=callbacks))
