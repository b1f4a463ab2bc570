"""The one YAML loader for files a user gives (``--config`` files, recipes, search spaces,
``--enqueue`` lists, accelerate configs): ``yaml.safe_load`` that also refuses what
``safe_load`` lets through silently or expensively.

- A key given twice in one mapping: PyYAML keeps the last one without a word; here it fails
  naming the file, both lines and the key. (A key a merge, ``<<: *base``, brings in may be
  overridden: that is what a merge is for.)
- An alias bomb: aliases (``*name``) share the anchored value when loaded, but anything that
  walks the value (a ``repr`` in a message, a copy, a comparison) expands it, and a
  300-byte file nesting aliases expands to gigabytes. A file may use at most
  :data:`MAX_ALIASES` aliases, may not expand to more than :data:`MAX_EXPANDED` values and
  characters, and an alias inside its own anchor (an endless value) fails.
- Text that is not UTF-8, nesting too deep for the parser, and every YAML syntax error fail
  as :class:`YamlError`, a :class:`~judgetrain.errors.UserError` naming the file, with a
  bounded message.
Docs: "reference/configuration.md".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from judgetrain.errors import UserError, shown

__all__ = ["MAX_ALIASES", "MAX_EXPANDED", "YamlError", "load_yaml", "read_yaml", "top_level_lines"]

# no configuration judgetrain reads needs more; a bomb needs far more of one or the other
MAX_ALIASES = 1_000
MAX_EXPANDED = 1_000_000  # nodes plus scalar characters, aliases expanded


class YamlError(UserError, ValueError):
    """A YAML file that cannot be read as a configuration, named with the fix."""


class _Refused(Exception):
    """What the loader refuses, turned into a :class:`YamlError` naming the file."""


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that counts aliases and refuses a key given twice."""

    def __init__(self, stream: str, where: str) -> None:
        super().__init__(stream)
        self.name = where  # what PyYAML's own messages call the text ("<unicode string>" otherwise)
        self.aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _Refused(f"more than {MAX_ALIASES:,} aliases (*name); write the values out instead")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: safe_load's own error says so
                    continue
                if first is not None:
                    raise _Refused(
                        f"line {line}: key {shown(key)} is given twice (first on line {first}); "
                        "keep one (YAML would silently keep the last)"
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root: Any) -> int:
    """Nodes plus scalar characters of ``root`` with every alias expanded, counted once per
    distinct node (so a bomb is measured without being expanded); :class:`_Refused` for an
    alias inside its own anchor."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = 1 + len(node.value)
            continue
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else list(node.value)
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in children), MAX_EXPANDED + 1)
            continue
        if id(node) in open_nodes:
            raise _Refused(f"line {node.start_mark.line + 1}: an alias inside its own anchor makes an endless value")
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise _Refused(f"line {child.start_mark.line + 1}: an alias inside its own anchor makes an endless value")
            stack.append((child, False))
    return sizes[id(root)]


def load_yaml(text: str, where: str) -> Any:
    """``text`` as ``yaml.safe_load`` reads it (None for an empty document), with the checks
    of this module; ``where`` names the text in a :class:`YamlError` (a file's path)."""
    return _load(text, where)[0]


def read_yaml(path: str | os.PathLike) -> Any:
    """The YAML file ``path`` (:func:`load_yaml`); a missing or unreadable file is a :class:`YamlError`."""
    return _load(_read_text(Path(path)), str(path))[0]


def top_level_lines(path: str | os.PathLike) -> tuple[Any, dict[Any, int]]:
    """:func:`read_yaml`, and the 1-based line of each key of a top-level mapping (``{}``
    when the document is not a mapping), for messages about one key."""
    return _load(_read_text(Path(path)), str(path))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise YamlError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise YamlError(f"{path}: a folder, not a YAML file") from None
    except UnicodeDecodeError as e:
        raise YamlError(f"{path}: not UTF-8 text (byte {e.start}); give a YAML file") from None
    except OSError as e:
        raise YamlError(f"{path}: cannot be read ({e.strerror or e})") from None


def _load(text: str, where: str) -> tuple[Any, dict[Any, int]]:
    loader = _Loader(text, where)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        if loader.aliases and _expanded_size(node) > MAX_EXPANDED:
            raise _Refused(
                f"its aliases (*name) expand to more than {MAX_EXPANDED:,} values and characters from "
                f"{len(text):,} written; write the values out instead of nesting aliases"
            )
        data = loader.construct_document(node)
        lines: dict[Any, int] = {}
        if isinstance(node, yaml.MappingNode) and isinstance(data, dict):
            for key_node, _ in node.value:
                if key_node.tag != "tag:yaml.org,2002:merge" and isinstance(key_node, yaml.ScalarNode):
                    lines.setdefault(loader.construct_object(key_node), key_node.start_mark.line + 1)
        return data, lines
    except _Refused as e:
        raise YamlError(f"{where}: {e}") from None
    except yaml.YAMLError as e:
        raise YamlError(f"{where}: not valid YAML ({shown(str(e), 400, quote=False)})") from None
    except RecursionError:
        raise YamlError(f"{where}: nested too deeply to read; flatten it") from None
    finally:
        loader.dispose()
