"""What every builder shares: its error and skip records, the typed config fields every
``build *`` command inherits (:mod:`.args`), splits and the ``build.json`` of a build
(:mod:`.steps`, :mod:`.common`), the loop over a JSON Lines manifest (:mod:`.manifests`), and what
a build is and what its ``--out`` may already hold (:mod:`.identity`, :mod:`.outfolder`).
Docs: "concepts/identity.md", "reference/configuration.md", "how-to/own-data.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "args": ["BuildArgs", "OutputArgs", "WorkBuildArgs"],
        "common": [
            "BuildError",
            "Fractions",
            "Skip",
            "balance_table",
            "builder_parser",
            "csv",
            "finish_summary",
            "parse_splits",
            "save_build",
            "split_table",
        ],
        "identity": ["RUN_ONLY", "build_identity", "is_leftover", "sweep_leftovers"],
        "images": ["KEPT_FORMATS", "check_image", "image_bytes", "to_rgb"],
        "manifests": ["read_manifest_lines", "report_skips"],
        "outfolder": ["WAYS_OUT", "already_built", "build_in_place"],
        "steps": [
            "DEFAULT_SPLITS",
            "PROCEDURES_HELP",
            "SPLIT_NAMES",
            "arrow_split",
            "assign_splits",
            "build_info",
            "cached_loader",
            "check_common",
            "config_json",
            "each_plan",
            "fresh_arrow_cache",
            "generate_splits",
            "manifest_source",
            "print_headline",
            "procedure_sources",
            "settle_source",
            "too_short",
            "work_dirs",
        ],
    },
)
