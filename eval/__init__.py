"""Evaluations (installed as ``judgetrain.eval``): a package per evaluation (``timecatch``,
``judge``, ``phasefusion``), the positional-bias analysis over their runs
(``bias``), and ``core``, what every evaluation shares (run folders, the
multi-process loop, statistics, ``eval report`` and ``eval compare``).
Docs: "concepts/identity.md".
"""
