"""Video multiple-choice questions as the builders and the evaluations share them: the manifest
(:mod:`.manifest`), a question's views (option orderings, the letter-only prompt and frame
grids, :mod:`.views`) and its frames decoded once for every grid (:mod:`.frames`).
``judgetrain eval phasefusion`` scores these views and ``judgetrain build consistency-views``
trains on them, so they live here, below both.
Docs: "concepts/phasefusion.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "frames": ["BATCH1_LINES", "Decoded", "decode_question"],
        "manifest": ["MAX_REPORTED_PROBLEMS", "ManifestError", "VideoQuestion", "check_line", "load_manifest"],
        "views": [
            "Grid",
            "INSTRUCTION",
            "LETTERS",
            "PREAMBLE",
            "inverse_permutation",
            "mcq_prompt",
            "ordering_permutation",
            "orderings",
            "to_content",
        ],
    },
)
