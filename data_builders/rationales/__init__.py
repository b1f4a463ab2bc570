"""``judgetrain build rationales``: SFT records with a teacher's rationale before the answer
(paper 002 §5E, F.1), distilled from Gemini, a local VLM or a replay file.

:mod:`.command` builds (:func:`build`, the CLI); :mod:`.config` is its typed config,
:mod:`.prompts` the teacher's prompt and the answer checks, :mod:`.items` the items and the
answer cache, :mod:`.teachers` the teachers, :mod:`.export` the records, statistics and summary.
Docs: "concepts/prism-mirage.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "command": [
            "Distillation",
            "build",
            "choices_by_id",
            "disagreements",
            "failed_records",
            "main",
            "make_parser",
            "plan_rows",
            "read_source",
            "teacher_counts",
            "teacher_description",
            "variant_info",
            "variant_splits",
            "write_variants",
        ],
        "config": ["BUILDER", "DEFAULT_GEMINI_MODEL", "RationaleConfig", "TARGETS", "TEACHERS", "VERSION"],
        "export": [
            "EXPORT_FILE",
            "PLOT_FILE",
            "VARIANTS",
            "answers_figure",
            "fmt",
            "mean_std",
            "plot_answers",
            "print_summary",
            "sft_rows",
            "statistics",
            "teacher_fields",
            "write_export",
        ],
        "items": [
            "CACHE_FORMAT",
            "Item",
            "TeacherAnswer",
            "TeacherCache",
            "TeacherRun",
            "collect_items",
            "from_cache",
            "load_rows",
            "row_at",
            "settle",
        ],
        "prompts": [
            "ANSWER_LINE",
            "ANSWER_PREFIX",
            "BASE_INSTRUCTIONS",
            "COMMIT",
            "JSON_FIELDS",
            "REASON_FIRST",
            "check_answer",
            "prompt_text",
            "rewrite_prompt",
            "sha256",
            "split_answer",
            "teacher_instruction",
            "with_rationale_completion",
        ],
        "teachers": [
            "FATAL_STATUS_CODES",
            "GeminiTeacher",
            "LocalTeacher",
            "RETRY_STATUS_CODES",
            "RateLimiter",
            "ReplayTeacher",
            "make_teacher",
        ],
    },
)
