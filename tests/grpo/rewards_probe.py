"""Test helper, run by ``accelerate launch`` in every process (tests/grpo/test_rewards.py): the
consistency reward on this rank's share of a generation batch, as TRL calls it on each process.
Reads ``FOLDER/batch.json`` (``{"0": {"completions": […], "columns": {…}}, "1": …}``) and writes
this rank's rewards to ``FOLDER/rank{R}.json`` (an error's text under ``"error"``). Nothing here
is part of the library.

    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 tests/grpo/rewards_probe.py FOLDER
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __name__ == "__main__":
    from accelerate import PartialState

    from judgetrain.grpo.rewards import consistency
    from judgetrain.train.run import setup_cpu_distributed

    folder = Path(sys.argv[1])
    setup_cpu_distributed()  # accelerate's CPU state over gloo, as a GRPO run on CPUs starts
    state = PartialState()
    mine = json.loads((folder / "batch.json").read_text())[str(state.process_index)]
    try:
        result = {"rewards": consistency(completions=mine["completions"], **mine["columns"]), "world": state.num_processes}
    except RuntimeError as e:
        result = {"error": str(e), "world": state.num_processes}
    (folder / f"rank{state.process_index}.json").write_text(json.dumps(result))
    # leave the gloo group together: a rank that exits while the other still talks to it aborts
    state.wait_for_everyone()
    state.destroy_process_group()
