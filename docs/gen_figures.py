"""Draw the figures of the concept pages from judgetrain's own builders and functions.

One PNG per page, into ``docs/assets/figures/``:

- ``timecatch.png``: one synthetic clip as ``judgetrain build timecatch`` made it: the original
  frames, the swapped-pair version and the Gaussian-noise frame version, the anomalous frames
  outlined and the records' answers named;
- ``prism.png``: a PRISM pairwise item of ``judgetrain build prism`` (Sequence A and B, one the
  gold order and one with a swapped pair), and a semantic-outlier negative of the same gold;
- ``ordering-probe.png``: an ordering-probe item of ``judgetrain build ordering-probe``: the
  shuffled images with their labels, and the gold order;
- ``phasefusion.png``: the frame grids ``judgetrain eval phasefusion`` scores (budget 4, 3
  phases) on a ``judgetrain build video-mcq`` clip, from :mod:`judgetrain.eval.phasefusion.views`
  and :meth:`judgetrain.mcq.views.Grid.indices`, with the frames they pick;
- ``positional-bias.png``: ``judgetrain eval bias``'s first-option figure
  (:func:`judgetrain.eval.bias.plots.first_option_figure`) for two constructed judges, one that
  always answers A and one that always picks the sequence shown first, on a PRISM build's
  pairwise records under layouts P0 (A shown first) and P4 (B shown first).

Everything is offline: the builders' synthetic sources at tiny sizes (``--synthetic 2``, LPIPS
with a random backbone), built into a temporary folder; fixed seeds (the builders' default seed),
so a rerun writes the same bytes. Under half a minute on 2 CPU cores.

    .venv/bin/python docs/gen_figures.py     # (re)write the five PNGs; prints where

Run it with judgetrain's environment (``.venv/bin/python``): the builders import datasets and
torch. Not part of the site (mkdocs.yml's ``exclude_docs``).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "assets" / "figures"
DPI = 100
WIDTH_IN = 9.6  # 960 px at DPI
ANOMALY = "#d62728"  # the outline of a perturbed frame
GOLD = "#2ca02c"
PHASE_STYLES = (("#1f77b4", "o"), ("#ff7f0e", "s"), ("#2ca02c", "^"), ("#9467bd", "D"))


def pyplot():
    """judgetrain's Agg pyplot, with the figures' font sizes."""
    from judgetrain.plotting import pyplot

    plt = pyplot()
    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "figure.titlesize": 12})
    return plt


def save(fig, name: str) -> Path:
    """``fig`` as ``docs/assets/figures/NAME``: a 256-colour PNG, no software stamp (the bytes depend
    on the drawing only)."""
    from PIL import Image

    path = OUT / name
    drawn = io.BytesIO()
    fig.savefig(drawn, dpi=DPI, format="png", metadata={"Software": None})
    pyplot().close(fig)
    with Image.open(drawn) as image:  # 256 colours, no dithering: a third of the bytes, the same look
        image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
    return path


def judgetrain_build(*argv: str) -> None:
    """``judgetrain build ARGV…`` in this process, its summary tables swallowed; exit on failure."""
    from judgetrain import cli

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        status = cli.main(["build", *argv, "--no-progress"])
    if status:
        sys.exit(f"judgetrain build {' '.join(argv)} failed (exit status {status}):\n{printed.getvalue()}")


def records(folder: Path) -> list[dict]:
    """Every record of a built set, split after split, ``meta`` parsed."""
    from judgetrain.records import load

    dataset = load(folder)
    rows = [dict(r) for split in sorted(dataset) for r in dataset[split]]
    for r in rows:
        r["meta"] = json.loads(r["meta"] or "{}")
    return rows


def outline(ax, color: str, width: float = 4.0) -> None:
    """A coloured frame around an image axis (its spines), ticks off."""
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_edgecolor(color)
        spine.set_linewidth(width)


def image_row(axes, images, marked=(), color: str = ANOMALY) -> None:
    """``images`` into a row of axes; the 0-based positions in ``marked`` outlined in ``color``."""
    for k, (ax, image) in enumerate(zip(axes, images, strict=True)):
        ax.imshow(image)
        if k in marked:
            outline(ax, color)
        else:
            outline(ax, "#bbbbbb", 0.8)


def row_title(axes, text: str, color: str = "black") -> None:
    """A row's heading, left-aligned above its first image and above the images' own labels."""
    axes[0].annotate(
        text, (0.0, 1.0), xycoords="axes fraction", xytext=(0, 17), textcoords="offset points", color=color, fontsize=10.5
    )


def frame_labels(axes, labels, marked=()) -> None:
    """One small label above each image, those at the positions in ``marked`` in the anomaly colour."""
    for k, (ax, label) in enumerate(zip(axes, labels, strict=True)):
        ax.set_title(label, fontsize=9, pad=3, color=ANOMALY if k in marked else "black")


# --------------------------------------------------------------------------- TimeCatch


def timecatch_figure(rows: list[dict]):
    """The first clip of at most 8 frames: original, swapped pair, noise frame (3 rows)."""
    plt = pyplot()
    clip = next(r["meta"]["sequence_id"] for r in rows if r["n_frames"] <= 8)
    mine = [r for r in rows if r["meta"]["sequence_id"] == clip]
    original = next(r for r in mine if r["task"] == "temporal_detect" and r["perturbation"] == "none")
    swap = next(r for r in mine if r["task"] == "temporal_localize")
    noise = next(r for r in mine if r["task"] == "frame_localize")
    n = original["n_frames"]
    times = original["meta"]["times_s"]
    swapped = [f - 1 for f in swap["meta"]["swapped_frames"]]
    noisy = noise["meta"]["noise_frame"] - 1
    fig, axes = plt.subplots(3, n, figsize=(WIDTH_IN, 5.0), gridspec_kw={"hspace": 0.7, "wspace": 0.06})
    fig.subplots_adjust(left=0.01, right=0.99, top=0.84, bottom=0.02)
    image_row(axes[0], original["images"])
    image_row(axes[1], swap["images"], swapped)
    image_row(axes[2], noise["images"], [noisy])
    frame_labels(axes[0], [f"{k + 1}  ({times[k]:g} s)" for k in range(n)])
    shown = swap["meta"]["presented_order"]
    frame_labels(axes[1], [f"{k + 1}" + (f"  (frame {f + 1})" if f != k else "") for k, f in enumerate(shown)], swapped)
    frame_labels(axes[2], [f"{k + 1}" + ("  (noise)" if k == noisy else "") for k in range(n)], [noisy])
    row_title(axes[0], f"original, frames 1–{n} in order: temporal_detect answer '{original['label']}'")
    row_title(axes[1], f"swap: neighbours {swap['label']} exchanged: temporal_localize answer '{swap['label']}'", ANOMALY)
    row_title(
        axes[2], f"noise: frame {noise['label']} replaced by Gaussian noise: frame_localize answer '{noise['label']}'", ANOMALY
    )
    fig.suptitle(f"TimeCatch: one synthetic clip ({clip}, {n} frames every {times[1] - times[0]:g} s) and its two anomalies")
    return fig


# --------------------------------------------------------------------------- PRISM


def sequences(record: dict) -> dict[str, list]:
    """Sequence letter -> its images, read from the prompt's text parts ending ``Sequence X:``."""
    out: dict[str, list] = {}
    images = iter(record["images"])
    current = None
    for part in record["prompt"][0]["content"]:
        heading = re.search(r"Sequence ([A-Z]):\s*$", part["text"] or "") if part["type"] == "text" else None
        if heading:
            current = heading.group(1)
            out[current] = []
        elif part["type"] == "image":
            out[current].append(next(images))
    return out


def negative_marks(record: dict) -> list[int]:
    """The 0-based positions a PRISM negative changed (``frame_order`` differs from the gold order)."""
    return [k for k, f in enumerate(record["meta"]["frame_order"]) if f != k]


def prism_figure(rows: list[dict]):
    """A P0 swap item (gold vs the swapped copy) and a semantic-1 negative of the same gold."""
    plt = pyplot()
    pairwise = [r for r in rows if r["task"] == "pairwise" and r["layout"] == "P0"]
    swap = next(r for r in pairwise if r["perturbation"] == "swap" and r["label"] == "B" and r["position"] > 0)
    outlier = next(r for r in pairwise if r["perturbation"] == "semantic-1" and r["meta"]["gold_id"] == swap["meta"]["gold_id"])
    seqs, gold = sequences(swap), swap["label"]
    bad = "A" if gold == "B" else "B"
    other = sequences(outlier)
    other_bad = other["A" if outlier["label"] == "B" else "B"]
    n = swap["n_frames"]
    fig, axes = plt.subplots(3, n, figsize=(WIDTH_IN, 5.6), gridspec_kw={"hspace": 0.6, "wspace": 0.06})
    fig.subplots_adjust(left=0.01, right=0.99, top=0.86, bottom=0.02)
    src = outlier["meta"]["outliers"][0]
    for row, (images, record) in enumerate(((seqs["A"], swap), (seqs["B"], swap), (other_bad, outlier))):
        negative = row == 2 or "AB"[row] == bad
        marked = negative_marks(record) if negative else []
        image_row(axes[row], images, marked)
        order = record["meta"]["frame_order"] if negative else range(n)
        frame_labels(axes[row], [f"step {f + 1}" if f is not None else src["category"] for f in order], marked)
    steps = " and ".join(str(k + 1) for k in negative_marks(swap))
    for row, letter in ((0, "A"), (1, "B")):
        what = f"perturbed, images {steps} swapped" if letter == bad else "gold order (the answer)"
        row_title(axes[row], f"Sequence {letter}: {what}", ANOMALY if letter == bad else GOLD)
    row_title(
        axes[2],
        f"another negative of the same gold (semantic-1): image {outlier['position'] + 1} from another procedure",
        ANOMALY,
    )
    title = swap["meta"]["title"]
    fig.suptitle(f"PRISM pairwise item (layout P0, answer '{gold}'): \u201c{title}\u201d")
    return fig


# --------------------------------------------------------------------------- ordering probe


def ordering_figure(rows: list[dict]):
    """The first item: its images as shown (Image A, B, …), the step each shows, the gold answer."""
    plt = pyplot()
    item = rows[0]
    meta = item["meta"]
    labels = [
        p["text"].rstrip(":") for p in item["prompt"][0]["content"] if p["type"] == "text" and p["text"].startswith("Image ")
    ]
    n = len(item["images"])
    fig, axes = plt.subplots(1, n, figsize=(WIDTH_IN, 3.9), gridspec_kw={"wspace": 0.08})
    fig.subplots_adjust(left=0.01, right=0.99, top=0.76, bottom=0.17)
    image_row(axes, item["images"])
    for ax, label, shown in zip(axes, labels, meta["shown_order"], strict=True):
        ax.set_title(label, fontsize=11, pad=4)
        step = meta["steps_used"][shown] + 1
        ax.set_xlabel(f"step {step} of {meta['procedure_steps']}", fontsize=9.5, color="#555555", labelpad=4)
    fig.suptitle(f"Ordering probe: {n} shuffled images of \u201c{meta['title']}\u201d", y=0.97)
    fig.text(0.5, 0.86, "the model sees only the images and their labels", ha="center", fontsize=9.5, color="#555555")
    fig.text(
        0.5,
        0.03,
        f"gold answer (labels in chronological order): {item['label']}",
        ha="center",
        fontsize=11,
        color=GOLD,
        weight="bold",
    )
    return fig


# --------------------------------------------------------------------------- PhaseFusion

BUDGET, PHASES = 4, 3


def phase_grids(n_frames: int, fps: float) -> tuple[list[list[int]], list[int]]:
    """The S phase grids and the union grid (dense b·S) as ``eval phasefusion`` scores them at origin 0."""
    from fractions import Fraction

    from judgetrain.eval.phasefusion.views import parse_arms

    _, grids = parse_arms("single,fusion,union", BUDGET, PHASES)
    phases = grids["phase"].indices(n_frames, fps, Fraction(0), BUDGET)
    (union,) = grids["union"].indices(n_frames, fps, Fraction(0), BUDGET)
    (single,) = grids["single"].indices(n_frames, fps, Fraction(0), BUDGET)
    assert single == phases[0], "the single arm is phase 0"
    return phases, union


def grid_axes(ax, phases: list[list[int]], union: list[int], n_frames: int, fps: float, evidence) -> None:
    """The time axis: one row of ticks per phase grid, the union row coloured by phase."""
    rows = [f"phase {s}" + (" = single" if s == 0 else "") for s in range(PHASES)]
    rows.append(f"union = dense{BUDGET * PHASES}")
    y_of = {name: len(rows) - 1 - k for k, name in enumerate(rows)}
    lo, hi = evidence[0] * fps, evidence[1] * fps
    ax.axvspan(lo, hi, color="#ffd92f", alpha=0.5, label=f"the question's evidence ({evidence[0]:.2f}–{evidence[1]:.2f} s)")
    for i in range(BUDGET + 1):
        ax.axvline(i * n_frames / BUDGET, color="#999999", lw=0.8, ls=":", zorder=0)
    for s, grid in enumerate(phases):
        color, marker = PHASE_STYLES[s]
        ax.plot(grid, [y_of[rows[s]]] * len(grid), marker, color=color, ms=9, ls="none", label=f"phase {s}")
        ax.plot(grid, [y_of[rows[-1]]] * len(grid), marker, color=color, ms=9, ls="none")
    ax.set_yticks(range(len(rows)), rows[::-1])
    ax.set_ylim(-0.6, len(rows) + 0.3)  # the top row is the legend's
    ax.set_xlim(-1, n_frames)
    ax.set_xlabel(f"frame index (T = {n_frames} frames, {n_frames / fps:g} s at {fps:g} fps; dotted: steps of T/b)")
    assert sorted(union) == sorted(f for grid in phases for f in grid), "the phase grids interleave into the union"
    ax.legend(loc="upper center", fontsize=9, ncol=4, framealpha=0.95)


def phasefusion_figure(folder: Path):
    """The grids of budget 4 and 3 phases on the first video-mcq clip, and the 12 frames they pick."""
    from judgetrain.video import decode_frames, probe

    plt = pyplot()
    manifest = folder / "manifest.jsonl"
    item = json.loads(manifest.read_text().splitlines()[0])
    video = folder / item["video"]
    info = probe(video)
    phases, union = phase_grids(info.n_frames, info.fps)
    frames = decode_frames(video, union, max_side=160)
    fig = plt.figure(figsize=(WIDTH_IN, 5.4))
    top = fig.add_gridspec(1, 1, left=0.15, right=0.99, top=0.92, bottom=0.34)
    grid_axes(fig.add_subplot(top[0, 0]), phases, union, info.n_frames, info.fps, item["evidence_s"])
    bottom = fig.add_gridspec(1, len(union), left=0.01, right=0.99, top=0.16, bottom=0.02, wspace=0.08)
    phase_of = {f: s for s, g in enumerate(phases) for f in g}
    axes = [fig.add_subplot(bottom[0, k]) for k in range(len(union))]
    for ax, f, image in zip(axes, union, frames, strict=True):
        ax.imshow(image)
        outline(ax, PHASE_STYLES[phase_of[f]][0], 3.0)
        ax.set_title(f"{f}", fontsize=9, pad=3, color=PHASE_STYLES[phase_of[f]][0])
    row_title(axes, "the union grid's frames in time order (frame index above, border: its phase)")
    fig.suptitle(
        f"PhaseFusion grids: budget b = {BUDGET}, S = {PHASES} phases; phase s takes \u230a(i + s/S)\u00b7T/b\u230b, i = 0\u2026b\u22121"
    )
    return fig


# --------------------------------------------------------------------------- positional bias


def judge_rows(records_: list[dict], answer) -> list[dict]:
    """``predictions.jsonl`` rows (:func:`judgetrain.eval.judge.command.prediction_row`) of a
    constructed judge: ``answer(row)`` is its letter for a row (which carries ``first_option``)."""
    from judgetrain.eval.judge.command import prediction_row
    from judgetrain.scoring import ChoiceScores

    def scores(letter: str, choices: list[str]) -> ChoiceScores:
        k = choices.index(letter)
        logprobs = [0.0 if j == k else -30.0 for j in range(len(choices))]
        return ChoiceScores(logprobs, logprobs, letter, k, list(choices))

    out = []
    for r in records_:
        record = {**r, "meta": json.dumps(r["meta"])}
        row = prediction_row(record, scores(r["choices"][0], r["choices"]), "constructed", None)
        out.append(prediction_row(record, scores(answer(row), r["choices"]), "constructed", None))
    return out


def bias_figure(rows: list[dict]):
    """``eval bias``'s first-option figure for an always-A judge and an always-first-shown judge."""
    from judgetrain.eval.bias.metrics import first_option_bias
    from judgetrain.eval.bias.plots import first_option_figure

    pyplot()
    pairwise = [r for r in rows if r["task"] == "pairwise"]
    named = [
        ("always answers A", first_option_bias(judge_rows(pairwise, lambda row: "A"))),
        ("always picks\nthe first shown", first_option_bias(judge_rows(pairwise, lambda row: row["first_option"]))),
    ]
    fig = first_option_figure(named)
    fig.set_size_inches(WIDTH_IN, 4.6)  # drawn for a report; the page's width, its labels a little larger
    for text in fig.findobj(lambda artist: hasattr(artist, "get_text") and hasattr(artist, "set_fontsize")):
        text.set_fontsize(text.get_fontsize() * 1.15)
    layouts = sorted({r["layout"] for r in pairwise})
    fig.suptitle(
        f"Illustration: two constructed judges on PRISM pairwise items ({', '.join(layouts)}; P4 shows B first)",
        fontsize=11,
    )
    return fig


# --------------------------------------------------------------------------- main


def main() -> int:
    start = time.monotonic()
    import judgetrain

    if ROOT not in Path(judgetrain.__file__).resolve().parents:
        sys.exit(f"judgetrain imports from {judgetrain.__file__}, not from this checkout {ROOT}")
    OUT.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="judgetrain-figures-") as tmp:
        work = Path(tmp)
        judgetrain_build("timecatch", "--out", str(work / "tc"), "--synthetic", "2", "--lpips-random-backbone")
        written.append(save(timecatch_figure(records(work / "tc")), "timecatch.png"))
        judgetrain_build("prism", "--out", str(work / "prism"), "--synthetic", "2", "--layouts", "P0,P4", "--modes", "pairwise")
        prism = records(work / "prism")
        written.append(save(prism_figure(prism), "prism.png"))
        judgetrain_build("ordering-probe", "--out", str(work / "ordering"), "--synthetic", "2")
        written.append(save(ordering_figure(records(work / "ordering")), "ordering-probe.png"))
        judgetrain_build("video-mcq", "--out", str(work / "vmcq"), "--synthetic", "1")
        written.append(save(phasefusion_figure(work / "vmcq"), "phasefusion.png"))
        written.append(save(bias_figure(prism), "positional-bias.png"))
    for path in written:
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KiB)")
    print(f"{len(written)} figures in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
