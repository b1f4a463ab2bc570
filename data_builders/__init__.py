"""Dataset builders (installed as ``judgetrain.data_builders``): a package per dataset family
(``timecatch``, ``prism``, ``mirage``, ``video_mcq``, ``rationales``), a module for the
smaller ones (``ordering``: the chronological-ordering probe; ``consistency_views``: the
views of consistency tuning), the sources they share (``synthetic``: the built-in physics
clips; ``procedures``: procedure manifests and their synthetic renders) and ``core``, what
every builder shares.
Docs: "concepts/index.md", "how-to/own-data.md".
"""
