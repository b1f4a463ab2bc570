"""TimeCatch's records: splits by sequence, the seeded anomalies, and every task's records.

:func:`assign_splits` puts each source sequence in one split, and every copy of the same media
(:func:`shared_media`) in the same one; :func:`draw_anomalies` and
:func:`noise_frame` draw a sequence's swap, noise frame and noise pixels from generators
seeded by (seed, source, sequence id); :func:`sequence_records` makes the detection and
localization records of one kept sequence. Docs: "concepts/timecatch.md".
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
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


def shared_media(done: list[tuple[SourceSequence, dict]]) -> list[dict]:
    """The sequences that share media by content: groups of ids (manifest order) linked, directly or
    through another, by a file of the same sha256 (a video, or a frame of a folder: the hashes of
    each sequence's work key, ``done[k][1]["key"]["files"]``), so the same file under two ids, or
    copied to two paths, is one group. Each group: ``{"ids": [...], "sha256": [the shared digests]}``,
    in the order of their first members; sequences that share nothing are in none."""
    order = {s.id: k for k, (s, _) in enumerate(done)}
    parent = {s.id: s.id for s, _ in done}

    def root(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    holders: dict[str, list[str]] = defaultdict(list)
    for s, d in done:
        for _path, digest in d["key"]["files"]:
            if digest is None or s.id in holders[digest]:
                continue
            if holders[digest]:
                a, b = sorted((root(s.id), root(holders[digest][0])), key=order.__getitem__)
                parent[b] = a  # the group's root is its first member
            holders[digest].append(s.id)
    groups: dict[str, list[str]] = defaultdict(list)
    for s, _ in done:
        groups[root(s.id)].append(s.id)
    shared = defaultdict(set)
    for digest, ids in holders.items():
        if len(ids) > 1:
            shared[root(ids[0])].add(digest)
    return [{"ids": ids, "sha256": sorted(shared[ids[0]])} for ids in groups.values() if len(ids) > 1]


def assign_splits(
    sequences: list[SourceSequence], fractions: dict[str, float], seed: int, together: Sequence[Sequence[str]] = ()
) -> dict[str, str]:
    """Split by source sequence, each group of ids in ``together`` (copies of the same media, see
    :func:`shared_media`) as one unit, so that no copy lands in another split than the rest. The
    manifest's split wins (for a group: the first member's that names one); the rest, per source
    (a group's: its first member's), are ordered by a seeded hash of their id (a group: the
    smallest of its members') and cut at the cumulative fractions: the sequence at position p of
    that order goes to the split whose [round(F_prev·N), round(F·N)) holds p, a group by the
    position of its first sequence, so without groups the counts are exact."""
    leader = {sid: group[0] for group in together for sid in group}
    units: dict[str, list[SourceSequence]] = defaultdict(list)
    for s in sequences:
        units[leader.get(s.id, s.id)].append(s)
    out: dict[str, str] = {}
    by_source: dict[str, list[list[SourceSequence]]] = defaultdict(list)
    for unit in units.values():
        named = next((s.split for s in unit if s.split), None)
        if named:
            out.update((s.id, named) for s in unit)
        else:
            by_source[unit[0].source].append(unit)
    names = list(fractions)
    for group in by_source.values():
        group.sort(key=lambda unit: min(derive_seed(seed, "split", s.source, s.id) for s in unit))
        n = sum(len(unit) for unit in group)
        ends, cum = [], 0.0
        for name in names:
            cum += fractions[name]
            ends.append(n if name == names[-1] else round(cum * n))
        position = 0
        for unit in group:
            name = next((names[k] for k, end in enumerate(ends) if position < end), names[-1])
            out.update((s.id, name) for s in unit)
            position += len(unit)
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


class _SequenceRecords:
    """One kept sequence and what its records are made from: its frames as PNG bytes, the seeded
    swap (frames ``i_swap`` and ``i_swap + 1``, 1-based) and noise frame (``i_noise``, 1-based), the
    presented orders (``gold``, ``swapped``: 0-based frame indices) and the metadata every record
    carries. One method per task returns that task's records in a fixed order."""

    def __init__(self, seq: SourceSequence, done: dict, folder: Path, cfg: TimeCatchConfig):
        self.seq, self.cfg = seq, cfg
        self.png = [(folder / name).read_bytes() for name in done["frames"]]
        n = self.n = len(self.png)
        self.i_swap, self.i_noise = draw_anomalies(cfg.seed, seq.source, seq.id, n)
        self.gold = list(range(n))
        self.swapped = list(range(n))
        self.swapped[self.i_swap - 1], self.swapped[self.i_swap] = self.swapped[self.i_swap], self.swapped[self.i_swap - 1]
        with Image.open(io.BytesIO(self.png[self.i_noise - 1])) as im:
            shape = (im.height, im.width, 3)
        self.noisy = list(self.png)
        self.noisy[self.i_noise - 1] = png_bytes(noise_frame(cfg.seed, seq.source, seq.id, shape))
        show_description = cfg.descriptions and bool(seq.description)
        self.prefix = f"Scene description: {seq.description}\n\n" if show_description else ""
        self.base_meta = {
            "sequence_id": seq.id,
            "subset": subset_of(n),
            "description": seq.description,
            "description_shown": show_description,
            "frame_labels": cfg.frame_labels,
            "times_s": done["times_s"],
            "source_frame_indices": done["source_indices"],
            "lpips_consecutive": done["lpips_consecutive"],
            "truncated_from": done.get("truncated_from"),
        }
        self.swap_meta = {
            "swapped_frames": [self.i_swap, self.i_swap + 1],
            "lpips_swapped": done["lpips_consecutive"][self.i_swap - 1],
        }
        self.noise_meta = {
            "noise_frame": self.i_noise,
            "noise": {"distribution": "normal", "mean": NOISE_MEAN, "std": NOISE_STD, "clip": [0, 255]},
        }

    def record(self, task, order, images, instruction, choices, label, perturbation, position, layout, extra) -> dict:
        """One record: ``images`` (PNG bytes) presented in ``order`` (0-based source frames), the
        scene description before ``instruction`` when shown, ``position`` 0-based (-1: none), and
        ``extra`` on top of the sequence's metadata. Its id is seeded by (seed, source, sequence,
        task, perturbation, layout)."""
        seq, cfg, n = self.seq, self.cfg, self.n
        meta = {**self.base_meta, **extra, "presented_order": order}
        rid = records.make_id(BUILDER, cfg.seed, seq.source, seq.id, task, perturbation, layout, prefix="tc-")
        return records.make_record(
            id=rid,
            task=task,
            images=[{"bytes": b, "path": None} for b in images],
            instruction=self.prefix + instruction,
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

    def temporal_detect(self) -> list[dict]:
        """Per detection prompt layout: the frames in order (no anomaly), then swapped."""
        out = []
        swapped_png = [self.png[i] for i in self.swapped]
        for layout in self.cfg.prompts:
            text, yes_is_anomaly = DETECT_PROMPTS[layout]
            polarity = {"yes_means_anomaly": yes_is_anomaly}
            label_gold, label_swap = ("no", "yes") if yes_is_anomaly else ("yes", "no")
            out.append(
                self.record("temporal_detect", self.gold, self.png, text, ["yes", "no"], label_gold, "none", -1, layout, polarity)
            )
            out.append(
                self.record(
                    "temporal_detect",
                    self.swapped,
                    swapped_png,
                    text,
                    ["yes", "no"],
                    label_swap,
                    "swap",
                    self.i_swap - 1,
                    layout,
                    {**self.swap_meta, **polarity},
                )
            )
        return out

    def temporal_localize(self) -> list[dict]:
        """The swapped frames; the answer is the swapped pair, ``"i and i+1"`` (1-based)."""
        return [
            self.record(
                "temporal_localize",
                self.swapped,
                [self.png[i] for i in self.swapped],
                TEMPORAL_LOCALIZE_PROMPT.format(n=self.n),
                temporal_choices(self.n, self.cfg.adjacent_choices),
                f"{self.i_swap} and {self.i_swap + 1}",
                "swap",
                self.i_swap - 1,
                "A",
                {**self.swap_meta, "adjacent_choices": self.cfg.adjacent_choices},
            )
        ]

    def frame_detect(self) -> list[dict]:
        """The frames as they are (answer "no"), then with the noise frame (answer "yes")."""
        polarity = {"yes_means_anomaly": True}
        return [
            self.record("frame_detect", self.gold, self.png, FRAME_DETECT_PROMPT, ["yes", "no"], "no", "none", -1, "A", polarity),
            self.record(
                "frame_detect",
                self.gold,
                self.noisy,
                FRAME_DETECT_PROMPT,
                ["yes", "no"],
                "yes",
                "noise",
                self.i_noise - 1,
                "A",
                {**self.noise_meta, **polarity},
            ),
        ]

    def frame_localize(self) -> list[dict]:
        """The frames with the noise frame; the answer is its number (1-based)."""
        return [
            self.record(
                "frame_localize",
                self.gold,
                self.noisy,
                FRAME_LOCALIZE_PROMPT.format(n=self.n),
                [str(k) for k in range(1, self.n + 1)],
                str(self.i_noise),
                "noise",
                self.i_noise - 1,
                "A",
                self.noise_meta,
            )
        ]


def sequence_records(seq: SourceSequence, done: dict, folder: Path, cfg: TimeCatchConfig) -> list[dict]:
    """All records of one kept sequence, in a fixed order: the tasks of ``cfg.tasks`` in the order
    temporal detection, temporal localization, frame detection, frame localization. ``done``: the
    sequence's frame files (in ``folder``), times, source indices and LPIPS, as its build kept them."""
    made = _SequenceRecords(seq, done, folder, cfg)
    tasks = {
        "temporal_detect": made.temporal_detect,
        "temporal_localize": made.temporal_localize,
        "frame_detect": made.frame_detect,
        "frame_localize": made.frame_localize,
    }
    return [record for task, make in tasks.items() if task in cfg.tasks for record in make()]
