"""What the evaluation tests share: reading the markdown tables of a report, checking that every
rate in them carries its n and Wilson 95% interval, and the Wilson interval worked by hand."""

from __future__ import annotations

import math
import re

import pytest

# A rate as the reports print it: "75.0 [30.1, 95.4] (n=4)", "– (n=0)" when undefined; a PRISM
# position cell adds " / F1".
RATE = re.compile(r"(?:–|\d+\.\d \[\d+\.\d, \d+\.\d\]) \(n=\d+\)(?: / (?:\d+\.\d|–))?")
WITH_INTERVAL = re.compile(r"\d+\.\d \[\d+\.\d, \d+\.\d\] \(n=\d+\)")
# Columns holding rates: accuracies, rates, shares, P(…), exact matches, "said …" shares, Table 2's
# task × source columns (a <br> in the header), a position grid's columns (where W_avg is).
RATE_HEADER = re.compile(r"acc|rate|share|P\(|exact|said|<br>", re.I)
NOT_RATE_HEADER = re.compile(r"random|balanced|chance|CI", re.I)
NOT_RATE_ROWS = {"Random", "Human", "n"}  # Table 2's expected-guess, reference and count rows
Z95 = 1.959963984540054  # the 97.5% standard normal quantile


def wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    """The Wilson score 95% interval by its formula: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    p = k / n
    centre = (p + Z95 ** 2 / (2 * n)) / (1 + Z95 ** 2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n ** 2)) / (1 + Z95 ** 2 / n)
    return centre - half, centre + half


def md_tables(md: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table of ``md``: (header cells, body rows of cells)."""
    out, block = [], []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            out.append((block[0], [r for r in block[1:] if not all(set(c) <= set("-:") for c in r)]))
            block = []
    return out


def _rate_columns(header: list[str]) -> list[int]:
    grid = "W_avg" in header
    return [j for j, h in enumerate(header)
            if (RATE_HEADER.search(h) or (grid and (h[:1].isdigit() or h == "W_avg"))) and not NOT_RATE_HEADER.search(h)]


def check_rates(md: str) -> int:
    """Assert that every cell of every rate column of ``md``'s tables (module constants) is a rate
    with its n (and its Wilson interval unless undefined); returns how many carry an interval."""
    with_interval = 0
    for header, rows in md_tables(md):
        for j in _rate_columns(header):
            for row in rows:
                if row[0] in NOT_RATE_ROWS and j > 0:
                    continue
                assert RATE.fullmatch(row[j]), \
                    f"column {header[j]!r}, row {row[0]!r}: {row[j]!r} is not a rate with n and interval"
                with_interval += bool(WITH_INTERVAL.match(row[j]))
    return with_interval


def delta_by_statsmodels(k1: int, n1: int, k2: int, n2: int) -> str:
    """``[lo, hi]`` in signed points of k2/n2 − k1/n1 (a later run minus the first), Newcombe's method 10
    as statsmodels computes it: what an `eval compare` Δ cell of two rates shows."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    lo, hi = confint_proportions_2indep(k2, n2, k1, n1, method="newcomb", compare="diff")
    return f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"


@pytest.fixture
def rates():
    """The helpers above, for tests in any folder under tests/eval."""
    class Rates:
        check = staticmethod(check_rates)
        is_rate = staticmethod(lambda text: WITH_INTERVAL.fullmatch(text) is not None)
        tables = staticmethod(md_tables)
        wilson = staticmethod(wilson_by_hand)
        delta = staticmethod(delta_by_statsmodels)

    return Rates
