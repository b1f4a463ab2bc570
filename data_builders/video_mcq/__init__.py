"""``judgetrain build video-mcq``: video multiple-choice manifests (DESIGN.md's format, read by
``judgetrain eval phasefusion``): synthetic physics questions offline, or converted from
EgoSchema, MVBench, Video-MME and NExT-QA.

:mod:`.command` is the CLI (:class:`VideoMcqConfig`, :func:`build`); :mod:`.synthetic` and
:mod:`.questions` make the synthetic set, :mod:`.converters` the converted ones (from the
benchmark readers of :mod:`.benchmarks`, on the file readers of :mod:`.annotations`), :mod:`.common`
what both write.
Docs: "concepts/phasefusion.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "command": ["VideoMcqConfig", "build", "main", "make_parser", "print_summary"],
        "common": [
            "BUILDER",
            "BUILD_INFO",
            "MANIFEST",
            "VERSION",
            "manifest_row",
            "post_init_base",
            "raise_problems",
            "write_manifest",
        ],
        "annotations": ["AnnotationRow", "Item", "annotation_rows", "csv_rows", "read_json", "whole_number"],
        "benchmarks": [
            "Benchmark",
            "CONVERTERS",
            "MVBENCH_TASKS",
            "NEXTQA_COLUMNS",
            "NEXTQA_MAP",
            "annotation_files",
            "benchmark_items",
        ],
        "converters": ["ConvertConfig", "build_converted", "convert"],
        "questions": [
            "Draft",
            "FASTEST_RATIO",
            "LEFTMOST_GAP",
            "MOST_BOUNCES_LEAD",
            "QTYPES",
            "QUESTIONS",
            "draft_question",
            "n_objects",
        ],
        "synthetic": [
            "BENCHMARK_SYNTHETIC",
            "DEFAULT_FPS",
            "DEFAULT_FRAMES",
            "DEFAULT_MIN_GAP_S",
            "DEFAULT_OPTIONS",
            "DEFAULT_SIZE",
            "FrameSize",
            "MAX_ATTEMPTS",
            "OptionCounts",
            "SyntheticConfig",
            "build_synthetic",
            "plan",
        ],
    },
)
