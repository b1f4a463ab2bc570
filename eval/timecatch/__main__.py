"""``python -m judgetrain.eval.timecatch`` / ``accelerate launch -m judgetrain.eval.timecatch``: the
evaluation in every process of a data-parallel launch (its typed config from ``--config`` and
flags, as the CLI parses it). Docs: "concepts/timecatch.md".
"""

from judgetrain.eval.core.sharded import run_as_module

run_as_module("judgetrain.eval.timecatch.command")
