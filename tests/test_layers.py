"""The architecture as the imports show it, checked on every module from the imports it
makes (lazy ones inside functions and type-checking ones too): the layers below, no import
circle, ``data_builders`` and ``eval`` apart, inside each of them the shared packages below
the protocols; no private name crosses a module; no name-prefix family outside a package;
no re-export outside a package face; every module points to the docs pages about it; no
library file or function too long. Docs: "reference/development.md"."""

from __future__ import annotations

import ast
import graphlib
import importlib
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.site_nav import nav_pages

REPO = Path(__file__).resolve().parents[1]
PARTS = ("judgetrain", "judgetrain.data_builders", "judgetrain.eval")
FOLDERS = {"judgetrain": REPO / "judgetrain", "judgetrain.data_builders": REPO / "data_builders",
           "judgetrain.eval": REPO / "eval"}
# lowest first: a module imports modules of its own layer and of the layers below, never above
LAYERS = (
    ("foundation", ("judgetrain", "judgetrain.errors", "judgetrain.config", "judgetrain.io", "judgetrain.jsonl",
                    "judgetrain.seeding", "judgetrain.lazy", "judgetrain.plotting", "judgetrain.records", "judgetrain.video",
                    "judgetrain.perceptual", "judgetrain.mcq", "judgetrain.identity", "judgetrain.wandb_mode", "judgetrain.pairs",
                    "judgetrain.cluster", "judgetrain.compat")),
    ("models and scoring", ("judgetrain.models", "judgetrain.scoring")),
    ("builders and evaluations", ("judgetrain.data_builders", "judgetrain.eval")),
    ("training", ("judgetrain.train", "judgetrain.consistency", "judgetrain.grpo", "judgetrain.reward")),
    ("sweeps", ("judgetrain.sweep",)),
    # `judgetrain slurm eval …` loads the evaluation's command by name, as the CLI's registry does
    ("front ends", ("judgetrain.cli", "judgetrain.__main__", "judgetrain.quickstart", "judgetrain.cluster.command",
                    "judgetrain.rank")),
)
APART = ("judgetrain.data_builders", "judgetrain.eval")  # one layer, and neither imports the other
# inside data_builders/ and eval/: what every protocol shares, lowest first, below the protocols
SHARED = {"judgetrain.data_builders": ("core", "synthetic", "procedures"), "judgetrain.eval": ("core",)}
# a protocol that builds on another (MIRAGE and the ordering probe use PRISM's layouts and negatives)
BUILDS_ON = {
    "judgetrain.data_builders.mirage": {"judgetrain.data_builders.prism"},
    "judgetrain.data_builders.ordering": {"judgetrain.data_builders.prism"},
    "judgetrain.data_builders.rationales": {"judgetrain.data_builders.prism", "judgetrain.data_builders.mirage"},
    "judgetrain.eval.bias": {"judgetrain.eval.judge", "judgetrain.eval.timecatch"},
    # an item page shows a PhaseFusion question's arm posterior as that evaluation computes it
    "judgetrain.eval.view": {"judgetrain.eval.phasefusion"},
}
DOCS = REPO / "docs"
MAX_FILE_LINES, MAX_FUNCTION_LINES = 600, 80


# --------------------------------------------------------------------------- the import graph


def modules(folders: dict[str, Path] = FOLDERS) -> dict[str, tuple[Path, bool]]:
    """Every library module: dotted name -> (file, is a package's ``__init__``)."""
    found = {}
    for package, folder in folders.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            if package == "judgetrain" and rel.parts[0] in ("data_builders", "eval"):
                continue
            parts = [p for p in rel.with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = (path, path.name == "__init__.py")
    return found


def _target(node: ast.ImportFrom, base: list[str]) -> str:
    if not node.level:
        return node.module or ""
    return ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))


def imports(module: str, path: Path, is_package: bool):
    """(line, imported module, names) for every import statement of ``path``."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, _target(node, base), [a.name for a in node.names]


def import_graph(folders: dict[str, Path] = FOLDERS) -> dict[str, list[tuple[str, int, str]]]:
    """module -> [(file, line, judgetrain module it imports)]; ``from P import m`` of a module
    ``m`` is an edge to ``P.m``, not to the package ``P``."""
    known = modules(folders)
    graph: dict[str, list[tuple[str, int, str]]] = {}
    for module, (path, is_package) in known.items():
        edges = graph.setdefault(module, [])
        for line, target, names in imports(module, path, is_package):
            if not target.startswith("judgetrain"):
                continue
            targets = [f"{target}.{n}" for n in names if f"{target}.{n}" in known] or [target]
            edges += [(str(path), line, t) for t in targets if t != module]
    return graph


def _layer(module: str) -> tuple[int, str]:
    entries = [(i, p) for i, (_, members) in enumerate(LAYERS) for p in members]
    return max(((i, p) for i, p in entries if module == p or module.startswith(p + ".")), key=lambda e: len(e[1]))


def _unit(module: str) -> tuple[str, str] | None:
    """(part, its package or module) of a module inside data_builders/ or eval/."""
    for part in SHARED:
        if module.startswith(part + "."):
            return part, module[len(part) + 1:].split(".")[0]
    return None


def layer_problems(graph) -> list[str]:
    """Imports that run upward, or across the two parts that stand apart."""
    wrong = []
    for module, edges in graph.items():
        (mine, _), part = _layer(module), next((p for p in APART if module.startswith(p + ".") or module == p), None)
        for path, line, target in edges:
            theirs, _ = _layer(target)
            other = next((p for p in APART if target.startswith(p + ".") or target == p), None)
            if theirs > mine or (part and other and part != other):
                wrong.append(f"{path}:{line}: {module} ({LAYERS[mine][0]}) imports {target} ({LAYERS[theirs][0]})")
    return wrong


def part_problems(graph) -> list[str]:
    """Inside data_builders/ and eval/: a protocol imports the shared packages and the protocols
    it builds on (:data:`BUILDS_ON`); a shared package imports only those below it."""
    wrong = []
    for module, edges in graph.items():
        mine = _unit(module)
        for path, line, target in edges:
            theirs = _unit(target)
            if mine is None or theirs is None or mine == theirs:
                continue
            shared = SHARED[mine[0]]
            if mine[1] in shared:
                allowed = theirs[1] in shared[: shared.index(mine[1])]
            else:
                allowed = theirs[1] in shared or f"{theirs[0]}.{theirs[1]}" in BUILDS_ON.get(f"{mine[0]}.{mine[1]}", ())
            if not allowed:
                wrong.append(f"{path}:{line}: {module} imports {target}, which its part does not let it "
                             f"(shared: {', '.join(shared)}; builds on: see BUILDS_ON)")
    return wrong


def circle(graph) -> list[str]:
    """One import circle of ``graph`` (modules, the first repeated at the end), or []."""
    try:
        graphlib.TopologicalSorter({m: {t for _, _, t in edges if t in graph} for m, edges in graph.items()}).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return []


def test_imports_follow_the_layers():
    assert layer_problems(import_graph()) == []


def test_inside_builders_and_evaluations_the_shared_packages_are_below_the_protocols():
    assert part_problems(import_graph()) == []


def test_no_import_circle():
    assert circle(import_graph()) == []


def test_library_modules_import_what_they_use_from_its_module_not_a_lazy_face():
    """A face built with ``judgetrain.lazy.attach`` names its modules as strings, which the
    graph above cannot follow; a library module that imported a name through one would hide
    that edge (and any circle it closes) from these checks."""
    known = modules()
    lazy = {m for m, (path, is_package) in known.items() if is_package and "attach(" in path.read_text(encoding="utf-8")}
    wrong = []
    for module, (path, is_package) in known.items():
        if is_package:
            continue
        for line, target, names in imports(module, path, is_package):
            via_face = [n for n in names if target in lazy and f"{target}.{n}" not in known]
            if via_face:
                wrong.append(f"{path.relative_to(REPO)}:{line}: takes {via_face} from the face {target}")
    assert wrong == [], "\n".join(wrong)


def test_an_upward_import_a_crossing_and_a_circle_are_each_caught(tmp_path):
    """The checks above, on a copy of the tree with three deliberate faults."""
    folders = {}
    for package, folder in FOLDERS.items():
        folders[package] = tmp_path / folder.name
        shutil.copytree(folder, folders[package], ignore=shutil.ignore_patterns("__pycache__"))
    with open(folders["judgetrain"] / "records.py", "a") as f:  # the record schema reaching up to the sweeps
        f.write("\nfrom judgetrain.sweep.controller import run_sweep\n")
    with open(folders["judgetrain.eval"] / "timecatch" / "metrics.py", "a") as f:  # an evaluation importing a builder
        f.write("\nfrom judgetrain.data_builders.timecatch.config import TIMECATCH_TASKS\n")
    with open(folders["judgetrain"] / "train" / "args.py", "a") as f:  # the leaf of training importing its entry
        f.write("\ndef _late():\n    from .run import setup\n")
    graph = import_graph(folders)
    problems = layer_problems(graph)
    assert any("judgetrain.records (foundation) imports judgetrain.sweep.controller (sweeps)" in p for p in problems)
    assert any("judgetrain.eval.timecatch.metrics" in p and "judgetrain.data_builders.timecatch.config" in p for p in problems)
    found = circle(graph)
    assert found[0] == found[-1] and {"judgetrain.train.args", "judgetrain.train.run"} <= set(found)
    # and a protocol reaching into another it does not build on
    with open(folders["judgetrain.data_builders"] / "video_mcq" / "common.py", "a") as f:
        f.write("\nfrom ..prism.layouts import LAYOUTS\n")
    assert any("video_mcq.common imports judgetrain.data_builders.prism.layouts" in p for p in part_problems(import_graph(folders)))


# --------------------------------------------------------------------------- names


def test_no_private_name_crosses_a_module():
    wrong = []
    for module, (path, is_package) in modules().items():
        for line, target, names in imports(module, path, is_package):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and target.startswith("judgetrain") and target != module:
                wrong.append(f"{path.relative_to(REPO)}:{line}: imports {private} from {target}")
    assert wrong == [], "\n".join(wrong)


def _module_aliases(module: str, path: Path, is_package: bool, known: set[str]) -> dict[str, str]:
    """Local names bound to judgetrain modules (``from judgetrain.eval.timecatch import report
    as R``, ``import judgetrain.train.run as run``) -> the module's dotted name."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    aliases = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in known})
        elif isinstance(node, ast.ImportFrom):
            target = _target(node, base)
            aliases.update({a.asname or a.name: f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known})
    return aliases


def _private_attributes(module: str, path: Path, is_package: bool, known: set[str]) -> list[str]:
    aliases = _module_aliases(module, path, is_package, known)
    return [f"{path.relative_to(REPO)}:{node.lineno}: uses {aliases[node.value.id]}.{node.attr}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
            and node.attr.startswith("_") and not node.attr.startswith("__") and aliases[node.value.id] != module]


def test_no_private_attribute_of_another_module_is_used():
    """``records._raw_rows`` crosses a module as surely as ``from records import _raw_rows``;
    the tests keep to public names too."""
    known = set(modules())
    wrong = []
    for module, (path, is_package) in modules().items():
        wrong += _private_attributes(module, path, is_package, known)
    for path in sorted((REPO / "tests").rglob("*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        wrong += _private_attributes(name, path, False, known)
        for line, target, names in imports(name, path, False):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and target.startswith("judgetrain"):
                wrong.append(f"{path.relative_to(REPO)}:{line}: imports {private} from {target}")
    assert wrong == [], "\n".join(wrong)


def _defined(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
            names.update(t.id for t in ([target] if isinstance(target, ast.Name) else getattr(target, "elts", []))
                         if isinstance(t, ast.Name))
    return names


def test_no_re_export_outside_a_package_face():
    """A module's ``__all__`` lists what it defines; names are handed on only by a package's
    ``__init__`` (its public face)."""
    wrong = []
    for _module, (path, is_package) in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if is_package:
            continue
        if "noqa: F401" in path.read_text(encoding="utf-8"):
            wrong.append(f"{path.relative_to(REPO)}: an import kept only to hand it on (noqa: F401)")
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                wrong += [f"{path.relative_to(REPO)}: __all__ lists {n!r}, which it does not define"
                          for n in ast.literal_eval(node.value) if n not in _defined(tree)]
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("package", sorted(m for m, (_, pkg) in modules().items() if pkg))
def test_every_name_of_a_package_face_resolves(package):
    face = importlib.import_module(package)
    missing = [n for n in getattr(face, "__all__", []) if getattr(face, n, None) is None]
    assert missing == []


def test_no_folder_holds_a_name_prefix_family():
    """Three modules of one folder sharing a name prefix (``train_config``, ``train_data``,
    ``train_model``) are a package waiting to be made."""
    wrong = []
    for folder in sorted({path.parent for path, _ in modules().values()}):
        stems = [p.stem for p in folder.glob("*.py") if not p.stem.startswith("__")]
        prefixes = Counter(s.split("_")[0] for s in stems if "_" in s)
        for prefix, n in prefixes.items():
            n += prefix in stems
            if n >= 3:
                wrong.append(f"{folder.relative_to(REPO)}: {n} modules named {prefix}*")
    assert wrong == [], "\n".join(wrong)


# --------------------------------------------------------------------------- docstrings and sizes


def test_module_docstrings_say_what_they_are_for_and_point_to_the_docs():
    """Each module's docstring ends in ``Docs: "PAGE.md"`` (or several, comma-separated): paths
    relative to docs/, each a page that exists and that the site's nav lists."""
    nav = set(nav_pages())
    wrong = []
    for _module, (path, _is_package) in modules().items():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        pointer = re.search(r"Docs: ((?:\"[^\"]+\"(?:,\s*)?)+)", doc)
        if not doc.strip() or pointer is None:
            wrong.append(f'{path.relative_to(REPO)}: no module docstring ending in Docs: "PAGE.md"')
            continue
        for page in re.findall(r"\"([^\"]+)\"", pointer.group(1)):
            if not (DOCS / page).is_file():
                wrong.append(f"{path.relative_to(REPO)}: no page docs/{page}")
            elif page not in nav:
                wrong.append(f"{path.relative_to(REPO)}: docs/{page} is not in mkdocs.yml's nav")
    assert wrong == [], "\n".join(wrong)


def test_no_library_file_or_function_is_too_long():
    wrong = []
    for _module, (path, _is_package) in modules().items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_FILE_LINES:
            wrong.append(f"{path.relative_to(REPO)}: {len(text.splitlines())} lines (split it along its seams)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.name} is {node.end_lineno - node.lineno + 1} lines")
    assert wrong == [], "\n".join(wrong)


def test_tests_mirror_the_packages():
    """Every test folder is named after a package (``tests/eval/phasefusion`` ↔
    ``judgetrain.eval.phasefusion``); ``tests/benchmarks`` tests the scripts of ``benchmarks/``,
    ``tests/docs`` the documentation site of ``docs/``."""
    packages = {m for m, (_, is_package) in modules().items() if is_package}
    wrong = []
    for folder in sorted(p for p in (REPO / "tests").rglob("*") if p.is_dir() and p.name != "__pycache__"):
        rel = folder.relative_to(REPO / "tests").parts
        if rel[0] in ("benchmarks", "docs"):
            continue
        name = "judgetrain." + ".".join(rel)
        if name not in packages:
            wrong.append(f"tests/{'/'.join(rel)}: no package {name}")
    assert wrong == [], "\n".join(wrong)
