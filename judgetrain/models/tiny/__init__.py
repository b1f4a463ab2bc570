"""Tiny, randomly initialised checkpoints of every model family, built offline in well under a
second each (``python -m judgetrain.models.tiny --out DIR``).

:mod:`.builder` builds each family's config, processor and weights (:func:`build_tiny`,
:func:`build_all`); :mod:`.tokenizer` makes the tokenizer, chat templates and generation
config; :mod:`.families` holds InternVL and Gemma-4; :mod:`.folder` keeps a folder that holds
another model from being replaced silently (:class:`TinyModelExistsError`).
Docs: "reference/api/registry.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "builder": [
            "QUICKSTART_FAMILIES",
            "REAL_WIDTHS",
            "TEMPLATES_DIR",
            "VARIANTS",
            "build_all",
            "build_tiny",
            "main",
            "random_real_width",
        ],
        "folder": ["DEFAULT_SEED", "RECORD_FILE", "TinyModelExistsError"],
        "families": ["GEMMA4_TEMPLATE", "INTERNVL_TEMPLATE", "gemma4", "internvl3", "internvl3_5"],
        "tokenizer": [
            "GEMMA4_NAMED",
            "GEMMA4_SPECIAL",
            "INTERNVL_NAMED",
            "INTERNVL_SPECIAL",
            "LLAVA_SPECIAL",
            "QWEN25_ADDED",
            "QWEN3_ADDED",
            "QWEN_SPECIAL",
            "VOCAB_MULTIPLE",
            "generation_config",
            "make_tokenizer",
            "padded_vocab",
            "tiny_corpus",
            "token_ids",
            "train_bpe",
            "trl_template",
        ],
    },
)
