"""Test helper, run by ``accelerate launch`` in every process (tests/train/test_launch.py):
``judgetrain.train``'s entrypoint with one extra callback, through the public
``callbacks=`` of :func:`judgetrain.train.script` (the hook ``judgetrain sweep``
uses), that writes this rank's trainable weights before training and after every
optimizer step to ``PROBE_DIR/rank{R}/step{N}.safetensors``, plus the
distributed type accelerate set up. Nothing here is part of the library.

    accelerate launch … tests/train/ddp_probe.py PROBE_DIR --config RECIPE [overrides…]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def probe(folder: Path):
    from accelerate import PartialState
    from safetensors.torch import save_file
    from transformers import TrainerCallback

    class Weights(TrainerCallback):
        def _save(self, args, state, model) -> None:
            out = folder / f"rank{args.process_index}"
            out.mkdir(parents=True, exist_ok=True)
            weights = {n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad}
            save_file(weights, str(out / f"step{state.global_step}.safetensors"))

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            (folder / f"rank{args.process_index}").mkdir(parents=True, exist_ok=True)
            info = {"distributed_type": str(PartialState().distributed_type), "num_processes": PartialState().num_processes}
            (folder / f"rank{args.process_index}" / "state.json").write_text(json.dumps(info))
            self._save(args, state, model)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            self._save(args, state, model)

    return Weights()


if __name__ == "__main__":
    from judgetrain.train import script

    folder = Path(sys.argv[1])
    sys.exit(script(sys.argv[2:], callbacks=[lambda evaluation, processor, args: probe(folder)]))
