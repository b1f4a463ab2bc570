"""``judgetrain build mirage``: MIRAGE (paper 002 §5E, C.2), human-validated generated image
sequences against rejected ones of the same prompt, as pairwise judge records in PRISM's layouts.

:mod:`.command` builds (:class:`MirageConfig`, :func:`build`, the CLI); :mod:`.sources`
reads the manifest (and writes its synthetic stand-in), :mod:`.records` pairs sequences and
makes the records.
Docs: "concepts/prism-mirage.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "command": [
            "MirageConfig",
            "PROTOCOL",
            "VERSION",
            "build",
            "build_counts",
            "main",
            "make_parser",
            "print_summary",
            "source_manifest",
            "warn_unequal",
        ],
        "records": [
            "BUILDER",
            "MIRAGE_INSTRUCTION",
            "Pairing",
            "TITLE_LABELS",
            "equal_length_pairs",
            "generate_records",
            "pair_prompts",
            "plan_splits",
            "prompt_records",
            "record_counts",
            "stratified_letters",
        ],
        "sources": [
            "DEFAULT_SYNTHETIC",
            "DOMAINS",
            "MiragePrompt",
            "MirageSequence",
            "SYNTHETIC_ANNOTATORS",
            "SYNTHETIC_GENERATORS",
            "SYNTHETIC_P_VALID",
            "SYNTHETIC_P_VALID_FAULTY",
            "majority",
            "read_mirage",
            "write_synthetic_mirage",
        ],
    },
)
