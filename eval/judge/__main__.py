"""``python -m judgetrain.eval.judge`` / ``accelerate launch -m judgetrain.eval.judge``: the
evaluation in every process of a data-parallel launch (its typed config from ``--config`` and
flags, as the CLI parses it). Docs: "concepts/prism-mirage.md".
"""

from judgetrain.eval.core.sharded import run_as_module

run_as_module("judgetrain.eval.judge.command")
