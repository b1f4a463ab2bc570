"""``judgetrain build timecatch``: TimeCatch (paper 000 §3), temporal anomalies (a swapped
pair of neighbouring frames) and frame-level anomalies (a frame of Gaussian noise), each as a
detection and a localization task, from videos, frame folders or the built-in synthetic clips.

:mod:`.command` builds (:func:`build`, the CLI); :mod:`.config` holds the typed config and
the prompts, :mod:`.sequences` the manifest and each source's frames (subsampling, LPIPS
filter), :mod:`.records` the splits, the anomalies and the records.
Docs: "concepts/timecatch.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "command": ["Sequences", "build", "main", "make_parser", "print_summary"],
        "config": [
            "BUILDER",
            "DEFAULT_INTERVAL_S",
            "DEFAULT_SPLITS",
            "DETECT_PROMPTS",
            "FRAME_DETECT_PROMPT",
            "FRAME_LOCALIZE_PROMPT",
            "LPIPS_THRESHOLD",
            "MAIN_MAX_FRAMES",
            "MAX_FRAMES",
            "MIN_FRAMES",
            "MIN_INTERVAL_S",
            "NOISE_MEAN",
            "NOISE_STD",
            "SOURCE_INTERVALS_S",
            "SPLIT_NAMES",
            "TEMPORAL_LOCALIZE_PROMPT",
            "TIMECATCH_TASKS",
            "TimeCatchConfig",
            "VERSION",
            "subset_of",
        ],
        "records": ["assign_splits", "draw_anomalies", "noise_frame", "sequence_records", "shared_media", "temporal_choices"],
        "sequences": [
            "SequenceSkip",
            "SourceSequence",
            "network_digest",
            "png_bytes",
            "process_sequence",
            "read_manifest",
            "work_key",
        ],
    },
)
