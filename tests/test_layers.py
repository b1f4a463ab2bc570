"""The package's dependency direction, read from the imports of every module (lazy ones
inside functions too): records / io ← models, scoring ← data_builders, eval ← train ←
sweep; the command-line front ends (cli, launch, quickstart, dashboard) sit on top. A
leading-underscore name is never imported from another module."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"judgetrain": REPO / "judgetrain", "judgetrain.data_builders": REPO / "data_builders",
           "judgetrain.eval": REPO / "eval"}
# layer of a module: the longest matching prefix wins
LAYERS = {
    "judgetrain": 0, "judgetrain.records": 0, "judgetrain.io": 0, "judgetrain.config": 0, "judgetrain.seeding": 0,
    "judgetrain.video": 0, "judgetrain.perceptual": 0,
    "judgetrain.models": 1, "judgetrain.scoring": 1,
    "judgetrain.data_builders": 2, "judgetrain.eval": 2,
    "judgetrain.train": 3, "judgetrain.train_config": 3, "judgetrain.train_resume": 3, "judgetrain.train_data": 3, "judgetrain.train_model": 3,
    "judgetrain.train_outputs": 3, "judgetrain.train_packing": 3, "judgetrain.judge_trainer": 3, "judgetrain.merge": 3, "judgetrain.accelerate_configs": 0, "judgetrain.errors": 0,
    "judgetrain.consistency": 3, "judgetrain.consistency_collator": 3, "judgetrain.consistency_views": 3,
    "judgetrain.jsonl": 0, "judgetrain.plotting": 0, "judgetrain.mcq_manifest": 0,
    "judgetrain.sweep": 4, "judgetrain.sweep_space": 4, "judgetrain.sweep_trial": 4, "judgetrain.sweep_reporting": 4,
    "judgetrain.sweep_sampler": 4, "judgetrain.sweep_results": 4,
    "judgetrain.cli": 9, "judgetrain.__main__": 9, "judgetrain.launch": 9, "judgetrain.quickstart": 9,
    "judgetrain.dashboard": 9, "judgetrain.deepspeed_configs": 0,
}
# builders and evaluations share a layer but neither may import the other
SIBLINGS = ("judgetrain.data_builders", "judgetrain.eval")


def _modules():
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            if package == "judgetrain" and path.parts[len(folder.parts)] in ("data_builders", "eval"):
                continue
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([package, *parts]), path, path.name == "__init__.py"


def _layer(module: str) -> tuple[int, str]:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best], best


def _imports(module: str, path: Path, is_package: bool):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target, [a.name for a in node.names]


def _top(name: str) -> str:
    for package in ("judgetrain.data_builders", "judgetrain.eval"):
        if name == package or name.startswith(package + "."):
            return package
    return name


def test_imports_follow_the_dependency_direction():
    wrong = []
    for module, path, is_package in _modules():
        mine, my_group = _layer(module)
        for line, target, _names in _imports(module, path, is_package):
            if not target.startswith("judgetrain"):
                continue
            theirs, their_group = _layer(target)
            upward = theirs > mine
            across = (mine == theirs == 2 and _top(module) != _top(target) and {_top(module), _top(target)} <= set(SIBLINGS))
            if upward or across:
                wrong.append(f"{path.relative_to(REPO)}:{line}: {module} (layer {mine}) imports {target} (layer {theirs})")
    assert wrong == [], "\n".join(wrong)


def test_no_private_name_crosses_a_module():
    wrong = []
    for module, path, is_package in _modules():
        for line, target, names in _imports(module, path, is_package):
            if not target.startswith("judgetrain"):
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and target != module:
                wrong.append(f"{path.relative_to(REPO)}:{line}: imports {private} from {target}")
    assert wrong == [], "\n".join(wrong)


def _module_aliases(module: str, path: Path, is_package: bool) -> dict[str, str]:
    """Local names bound to judgetrain modules (``from judgetrain import records``,
    ``import judgetrain.train as train``) -> the module's dotted name."""
    known = {m for m, _p, _pkg in _modules()}
    aliases = {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in known:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            target = (".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
                      if node.level else node.module or "")
            for a in node.names:
                if f"{target}.{a.name}" in known:
                    aliases[a.asname or a.name] = f"{target}.{a.name}"
    return aliases


def _private_attributes(module: str, path: Path, is_package: bool) -> list[str]:
    aliases = _module_aliases(module, path, is_package)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__") and aliases[node.value.id] != module):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: uses {aliases[node.value.id]}.{node.attr}")
    return found


def test_no_private_attribute_of_another_module_is_used():
    """``records._raw_rows`` crosses a module as surely as ``from records import _raw_rows``;
    the tests keep to public names too."""
    wrong = []
    for module, path, is_package in _modules():
        wrong += _private_attributes(module, path, is_package)
    for path in sorted((REPO / "tests").glob("*.py")):
        wrong += _private_attributes(f"tests.{path.stem}", path, False)
        for line, target, names in _imports(f"tests.{path.stem}", path, False):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and target.startswith("judgetrain"):
                wrong.append(f"{path.relative_to(REPO)}:{line}: imports {private} from {target}")
    assert wrong == [], "\n".join(wrong)


README = REPO / "README.md"
MAX_FILE_LINES, MAX_FUNCTION_LINES = 600, 80


def test_module_docstrings_say_what_they_are_for_and_point_to_the_readme():
    import re

    headings = {line.lstrip("#").strip() for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("#")}
    wrong = []
    for module, path, _is_package in _modules():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        pointer = re.search(r"README: ((?:\"[^\"]+\"(?:,\s*)?)+)", doc)
        if not doc.strip() or pointer is None:
            wrong.append(f"{path.relative_to(REPO)}: no module docstring ending in README: \"SECTION\"")
            continue
        wrong += [f"{path.relative_to(REPO)}: README has no section {name!r}"
                  for name in re.findall(r"\"([^\"]+)\"", pointer.group(1)) if name not in headings]
    assert wrong == [], "\n".join(wrong)


def test_no_library_file_or_function_is_too_long():
    wrong = []
    for _module, path, _is_package in _modules():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_FILE_LINES:
            wrong.append(f"{path.relative_to(REPO)}: {len(text.splitlines())} lines (split it along its seams)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.name} is {node.end_lineno - node.lineno + 1} lines")
    assert wrong == [], "\n".join(wrong)
