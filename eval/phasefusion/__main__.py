"""``python -m judgetrain.eval.phasefusion`` / ``accelerate launch -m judgetrain.eval.phasefusion``: the
evaluation in every process of a data-parallel launch (its typed config from ``--config`` and
flags, as the CLI parses it). Docs: "concepts/phasefusion.md".
"""

from judgetrain.eval.core.sharded import run_as_module

run_as_module("judgetrain.eval.phasefusion.command")
