"""TimeCatch's records: splits by sequence, the seeded anomalies, and every task's records.

:func:`assign_splits` puts each source sequence in one split; :func:`draw_anomalies` and
:func:`noise_frame` draw a sequence's swap, noise frame and noise pixels from generators
seeded by (seed, source, sequence id); :func:`sequence_records` makes the detection and
localization records of one kept sequence. README: "`judgetrain build timecatch`".
"""

from __future__ import annotations

import io
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import numpy as np
from PIL import Image

from judgetrain import records
from judgetrain.seeding import derive_seed, rng_for

from .config import (
    BUILDER,
    DETECT_PROMPTS,
    FRAME_DETECT_PROMPT,
    FRAME_LOCALIZE_PROMPT,
    NOISE_MEAN,
    NOISE_STD,
    TEMPORAL_LOCALIZE_PROMPT,
    TimeCatchConfig,
    subset_of,
)
from .sequences import SourceSequence, png_bytes


def assign_splits(sequences: list[SourceSequence], fractions: dict[str, float], seed: int) -> dict[str, str]:
    """Split by source sequence. The manifest's split wins; the rest, per
    source, are ordered by a seeded hash of their id and cut at the cumulative
    fractions (exact counts: round(cumulative fraction × N))."""
    out: dict[str, str] = {}
    by_source: dict[str, list[SourceSequence]] = defaultdict(list)
    for s in sequences:
        if s.split:
            out[s.id] = s.split
        else:
            by_source[s.source].append(s)
    names = list(fractions)
    for group in by_source.values():
        group.sort(key=lambda s: derive_seed(seed, "split", s.source, s.id))
        n, start, cum = len(group), 0, 0.0
        for name in names:
            cum += fractions[name]
            end = n if name == names[-1] else round(cum * n)
            for s in group[start:end]:
                out[s.id] = name
            start = end
    return out


def temporal_choices(n: int, adjacent_only: bool) -> list[str]:
    """Answer strings for temporal localization: every unordered pair of frame
    numbers (C(n, 2) choices), or the n−1 adjacent pairs; 1-based, ``"i and j"``, i < j."""
    pairs = [(i, i + 1) for i in range(1, n)] if adjacent_only else list(combinations(range(1, n + 1), 2))
    return [f"{a} and {b}" for a, b in pairs]


def draw_anomalies(seed: int, source: str, seq_id: str, n: int) -> tuple[int, int]:
    """(i_swap, i_noise), 1-based: i_swap ~ U{1…n−1} (frames i, i+1 swapped), i_noise ~ U{1…n}."""
    rng = rng_for(seed, "timecatch-anomaly", source, seq_id)
    return int(rng.integers(1, n)), int(rng.integers(1, n + 1))


def noise_frame(seed: int, source: str, seq_id: str, shape: tuple[int, ...]) -> np.ndarray:
    """I.i.d. Gaussian pixels, round(N(127.5, 64²)) clipped to 0…255, at ``shape``."""
    rng = rng_for(seed, "timecatch-noise", source, seq_id)
    return np.clip(np.rint(rng.normal(NOISE_MEAN, NOISE_STD, size=shape)), 0, 255).astype(np.uint8)


def sequence_records(seq: SourceSequence, done: dict, folder: Path, cfg: TimeCatchConfig) -> list[dict]:
    """All records of one kept sequence, in a fixed order."""
    png = [(folder / name).read_bytes() for name in done["frames"]]
    n = len(png)
    subset = subset_of(n)
    i_swap, i_noise = draw_anomalies(cfg.seed, seq.source, seq.id, n)
    swapped = list(range(n))
    swapped[i_swap - 1], swapped[i_swap] = swapped[i_swap], swapped[i_swap - 1]
    with Image.open(io.BytesIO(png[i_noise - 1])) as im:
        shape = (im.height, im.width, 3)
    noisy = list(png)
    noisy[i_noise - 1] = png_bytes(noise_frame(cfg.seed, seq.source, seq.id, shape))
    show_description = cfg.descriptions and bool(seq.description)
    prefix = f"Scene description: {seq.description}\n\n" if show_description else ""
    base_meta = {
        "sequence_id": seq.id,
        "subset": subset,
        "description": seq.description,
        "description_shown": show_description,
        "frame_labels": cfg.frame_labels,
        "times_s": done["times_s"],
        "source_frame_indices": done["source_indices"],
        "lpips_consecutive": done["lpips_consecutive"],
        "truncated_from": done.get("truncated_from"),
    }
    swap_meta = {"swapped_frames": [i_swap, i_swap + 1], "lpips_swapped": done["lpips_consecutive"][i_swap - 1]}
    noise_meta = {
        "noise_frame": i_noise,
        "noise": {"distribution": "normal", "mean": NOISE_MEAN, "std": NOISE_STD, "clip": [0, 255]},
    }
    out = []

    def add(task, order, images, instruction, choices, label, perturbation, position, layout, extra):
        meta = {**base_meta, **extra, "presented_order": order}
        rid = records.make_id(BUILDER, cfg.seed, seq.source, seq.id, task, perturbation, layout, prefix="tc-")
        out.append(
            records.make_record(
                id=rid,
                task=task,
                images=[{"bytes": b, "path": None} for b in images],
                instruction=prefix + instruction,
                answer=label,
                choices=choices,
                label=label,
                source=seq.source,
                perturbation=perturbation,
                position=position,
                n_frames=n,
                layout=layout,
                meta=meta,
                image_labels=[f"Frame {k}:" for k in range(1, n + 1)] if cfg.frame_labels else None,
            )
        )

    gold = list(range(n))
    if "temporal_detect" in cfg.tasks:
        for layout in cfg.prompts:
            text, yes_is_anomaly = DETECT_PROMPTS[layout]
            polarity = {"yes_means_anomaly": yes_is_anomaly}
            add(
                "temporal_detect", gold, png, text, ["yes", "no"], "no" if yes_is_anomaly else "yes", "none", -1, layout, polarity
            )
            add(
                "temporal_detect",
                swapped,
                [png[i] for i in swapped],
                text,
                ["yes", "no"],
                "yes" if yes_is_anomaly else "no",
                "swap",
                i_swap - 1,
                layout,
                {**swap_meta, **polarity},
            )
    if "temporal_localize" in cfg.tasks:
        add(
            "temporal_localize",
            swapped,
            [png[i] for i in swapped],
            TEMPORAL_LOCALIZE_PROMPT.format(n=n),
            temporal_choices(n, cfg.adjacent_choices),
            f"{i_swap} and {i_swap + 1}",
            "swap",
            i_swap - 1,
            "A",
            {**swap_meta, "adjacent_choices": cfg.adjacent_choices},
        )
    if "frame_detect" in cfg.tasks:
        add("frame_detect", gold, png, FRAME_DETECT_PROMPT, ["yes", "no"], "no", "none", -1, "A", {"yes_means_anomaly": True})
        add(
            "frame_detect",
            gold,
            noisy,
            FRAME_DETECT_PROMPT,
            ["yes", "no"],
            "yes",
            "noise",
            i_noise - 1,
            "A",
            {**noise_meta, "yes_means_anomaly": True},
        )
    if "frame_localize" in cfg.tasks:
        add(
            "frame_localize",
            gold,
            noisy,
            FRAME_LOCALIZE_PROMPT.format(n=n),
            [str(k) for k in range(1, n + 1)],
            str(i_noise),
            "noise",
            i_noise - 1,
            "A",
            noise_meta,
        )
    return out
