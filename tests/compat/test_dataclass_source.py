"""judgetrain.compat.dataclass_source on a small installed package written here: the fields of a
dataclass read from source in dataclass order (a base's first, through a relative import and a
package face), enums as enums, what is computed named and shown as its expression, ClassVars
and the class's own names aside; nothing imported (the package would fail to import)."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from transformers import HfArgumentParser

from judgetrain.compat.dataclass_source import Unread, dataclass_fields, source_file, standin
from judgetrain.compat.versions import UpstreamChanged

BASE = '''
import enum
from dataclasses import dataclass, field
from typing import ClassVar, Literal

raise ImportError("read, never imported")


class Mode(str, enum.Enum):
    FAST = "fast"
    SLOW = "slow"


@dataclass
class Base:
    mode: Mode | str = field(default="fast", metadata={"help": "the mode"})
    level: str = field(default="info", metadata={"help": "a level", "choices": LEVELS.keys()})
    tags: list[str] = field(default_factory=list, metadata={"help": "tags"})
    shape: Literal["a", "b"] = "a"
    hidden: int = field(default=0, init=False)
    kind: ClassVar[str] = "base"
'''
CONFIG = '''
from dataclasses import dataclass, field

from .base import Base

default_lr = 1e-3


@dataclass
class Child(Base):
    lr: float = field(default=default_lr, metadata={"help": "learning rate"})
    tags: list[str] = field(default_factory=lambda: ["x"], metadata={"help": "tags, again"})
    other: "Unknown | None" = None
    strict: bool = field(default=True, metadata={"help": "be strict"})


class Plain(Base):
    pass
'''


@pytest.fixture()
def package(tmp_path, monkeypatch) -> str:
    name = f"fakelib_{uuid.uuid4().hex[:8]}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("from .config import Child\n")
    (tmp_path / name / "base.py").write_text(BASE)
    (tmp_path / name / "config.py").write_text(CONFIG)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_fields_in_dataclass_order_with_what_is_computed_named(package):
    fields = {f.name: f for f in dataclass_fields(package, "Child")}  # through the package face
    assert list(fields) == ["mode", "level", "tags", "shape", "hidden", "lr", "other", "strict"]
    assert fields["tags"].default_factory() == ["x"] and fields["tags"].metadata == {"help": "tags, again"}
    assert fields["lr"].unread == ("default",) and fields["lr"].default == Unread("default_lr", package)
    assert fields["level"].unread == ("metadata:'choices'",) and fields["level"].metadata == {"help": "a level"}
    assert not fields["hidden"].init and fields["shape"].default == "a"
    assert [m.value for m in fields["mode"].type.__args__[0]] == ["fast", "slow"]  # Mode | str, Mode as an enum
    assert source_file(f"{package}.config").name == "config.py"


def test_the_standin_lists_as_the_source_declares(package):
    parser = HfArgumentParser(standin("Child", dataclass_fields(f"{package}.config", "Child")))
    actions = {a.dest: a for a in parser._actions}
    assert list(actions["mode"].choices) == ["fast", "slow"] and actions["mode"].default == "fast"
    assert actions["tags"].nargs == "+" and actions["tags"].default == ["x"]
    assert list(actions["shape"].choices) == ["a", "b"]
    assert actions["lr"].default == f"default_lr, as {package} computes it"
    assert "--no_strict" in parser.format_help() and "hidden" not in actions and "kind" not in actions
    assert dataclasses.is_dataclass(parser.dataclass_types[0])


def test_a_missing_class_or_a_class_that_is_no_dataclass_is_named(package):
    with pytest.raises(UpstreamChanged, match=rf"no longer offers {package}\.config\.Plain as a @dataclass"):
        dataclass_fields(f"{package}.config", "Plain")
    with pytest.raises(UpstreamChanged, match=rf"no longer offers {package}\.config\.Gone"):
        dataclass_fields(f"{package}.config", "Gone")
    with pytest.raises(UpstreamChanged, match=rf"no longer offers the module {package}\.nothing"):
        source_file(f"{package}.nothing")
