"""The pages the documentation site's navigation (mkdocs.yml's ``nav``) lists, in order: read by
the layering test (each module's ``Docs:`` page must be one) and the example walk (its order)."""

from __future__ import annotations

from pathlib import Path

import yaml

MKDOCS = Path(__file__).resolve().parents[1] / "mkdocs.yml"


def nav_pages() -> list[str]:
    """Every page of the nav, paths relative to docs/, in the order a reader meets them."""
    found: list[str] = []

    def walk(entry) -> None:
        if isinstance(entry, str):
            found.append(entry)
        elif isinstance(entry, list):
            for item in entry:
                walk(item)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)

    walk(yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))["nav"])
    return found
