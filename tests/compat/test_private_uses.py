"""Every use of an upstream library's internals lives in judgetrain/compat/: this test reads every
module of judgetrain/, data_builders/, eval/ and benchmarks/ (compat/ aside) with ``ast`` and
lists, file:line and what, each use of transformers, TRL, PEFT, accelerate, datasets or Optuna
that is not their documented API:

(a) a module of theirs that is not in :data:`PUBLIC` (imported, reached as an attribute of an
    imported package, or named in a string, as ``python -m MODULE`` does), or a name with a
    leading underscore imported from them;
(b) a private name (``x._name``, ``getattr(x, "_name")``, a keyword argument or parameter
    ``_name``) that judgetrain's own code does not define, so that is someone else's, unless
    :data:`STDLIB_PRIVATE` says whose and why it stays;
(c) ``.__dict__`` (an object's undocumented state; ``vars()`` of judgetrain's own objects is fine);
(d) the public-looking but undocumented attributes transformers' Trainer and caches carry
    (:data:`UNDOCUMENTED`, and ``.layers`` of a cache).
docs/get-started/install.md: "Upstream versions"."""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("judgetrain", "data_builders", "eval", "benchmarks")
COMPAT = REPO / "judgetrain" / "compat"
UPSTREAM = ("transformers", "trl", "peft", "accelerate", "datasets", "optuna")

# Modules of theirs judgetrain may use: name -> (the names it may take from it, None: any public
# one), and why it is public. A package face (`import trl`, `from transformers import X`) is
# public: what it exports is what the library documents.
PUBLIC: dict[str, tuple[frozenset[str] | None, str]] = {
    **{lib: (None, "the package face: what it exports is its documented API") for lib in UPSTREAM},
    "accelerate.utils": (None, "documented in accelerate's reference, 'Utilities' (parse_flag_from_env, broadcast_object_list, "
                               "find_executable_batch_size, …)"),
    "optuna.samplers": (None, "documented module: optuna.samplers (TPESampler, BaseSampler, …)"),
    "optuna.pruners": (None, "documented module: optuna.pruners"),
    "optuna.storages": (None, "documented module: optuna.storages (RDBStorage, JournalStorage, fail_stale_trials, "
                              "RetryFailedTrialCallback, …)"),
    "optuna.storages.journal": (None, "documented module since Optuna 4.0: optuna.storages.journal (JournalFileBackend, …)"),
    "optuna.trial": (None, "documented module: optuna.trial (Trial, FrozenTrial, TrialState, create_trial)"),
    "optuna.study": (None, "documented module: optuna.study (Study, StudyDirection, …)"),
    "optuna.exceptions": (None, "documented module: optuna.exceptions"),
    "optuna.distributions": (None, "documented module: optuna.distributions"),
    "optuna.visualization": (None, "documented module: optuna.visualization (plot_* functions)"),
    "optuna.importance": (None, "documented module: optuna.importance"),
    "optuna.logging": (None, "documented module: optuna.logging (set_verbosity, …)"),
    "transformers.utils.logging": (None, "documented in transformers' 'Logging' page (from transformers.utils import logging)"),
    "transformers.integrations.sdpa_attention": (frozenset({"sdpa_attention_forward"}),
                                                 "transformers' 'Attention interface' page wraps it this way"),
    "transformers.masking_utils": (frozenset({"sdpa_mask"}), "transformers' 'Attention interface' page registers it this way"),
    "peft.utils": (frozenset({"set_peft_model_state_dict", "get_peft_model_state_dict"}),
                   "documented in PEFT's reference, 'Functions for PEFT integration'"),
}
# private names of Python's own modules (not an upstream library's), each with why it stays
STDLIB_PRIVATE = {
    "_exit": "os._exit: documented API despite the underscore (leave a forked child at once)",
}
# public-looking attributes of transformers' Trainer that its documentation does not name
UNDOCUMENTED = ("current_gradient_accumulation_steps", "model_accepts_loss_kwargs", "hf_deepspeed_config")
_CACHE = re.compile(r"cache|past_key_values", re.IGNORECASE)
_MODULE_STRING = re.compile(rf"^(?:{'|'.join(UPSTREAM)})(?:\.[a-z_][a-z0-9_]*)+$")


def library_files(root: Path = REPO) -> list[Path]:
    """Every module of the library and the benchmarks, judgetrain/compat/ aside."""
    out = []
    for folder in FOLDERS:
        out += [p for p in sorted((root / folder).rglob("*.py"))
                if "__pycache__" not in p.parts and not (folder == "judgetrain" and p.parts[len(root.parts) + 1:][:1]
                                                          in (("data_builders",), ("eval",), ("compat",)))]
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def own_private_names(trees: list[ast.Module]) -> set[str]:
    """The private names judgetrain's own code defines: functions, classes, and every name or
    attribute it assigns (module, class and instance attributes). Not parameters: a private
    parameter is how an override takes upstream's private argument (``_internal_call``)."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.alias) and node.asname:
                names.add(node.asname)
    return {n for n in names if _private(n)}


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _module_problem(module: str, names: list[str]) -> str | None:
    """Why importing ``names`` from ``module`` (``[]``: the module itself) is not public, or None."""
    if module.split(".")[0] not in UPSTREAM:
        return None
    private = [n for n in [*module.split("."), *names] if _private(n)]
    if private:
        return f"imports the private name {private[0]} of {module}"
    allowed = PUBLIC.get(module)
    if allowed is None:
        taken = [n for n in names if f"{module}.{n}" in PUBLIC]  # `from transformers.utils import logging`
        return None if names and len(taken) == len(names) else f"imports {module}, not a documented module"
    wanted, _ = allowed
    extra = [n for n in names if wanted is not None and n not in wanted]
    return f"imports {extra[0]} from {module}, which its documentation does not show" if extra else None


def _dotted(node: ast.expr) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def _chain_problem(node: ast.Attribute, modules: dict[str, str]) -> str | None:
    """An internal module reached through an imported package (``datasets.config.X``)."""
    dotted = _dotted(node)
    if not dotted or dotted[0] not in modules:
        return None
    path = [modules[dotted[0]], *dotted[1:]]
    for end in range(len(path), 1, -1):
        name = ".".join(path[:end])
        if name in PUBLIC:
            return None
        if _is_module(name):
            return f"uses {name}, not a documented module"
    return None


def _name_arg(call: ast.Call) -> str | None:
    """The attribute name a ``getattr``/``setattr``/``hasattr``/``delattr`` call names."""
    if isinstance(call.func, ast.Name) and call.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(call.args) >= 2:
        arg = call.args[1]
        return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
    return None


def _keyword_parameters(args: ast.arguments) -> list[ast.arg]:
    """The parameters a caller may pass by name: those with a default, and keyword-only ones. A
    private positional one without a default is the unused-argument convention (``_module``)."""
    positional = [*args.posonlyargs, *args.args]
    return positional[len(positional) - len(args.defaults):] + args.kwonlyargs


def private_uses(path: Path, tree: ast.Module, own: set[str]) -> Iterator[str]:
    """Each use of an upstream internal in ``tree`` (see the module docstring), as "file:line: what"."""
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    modules = {}  # local name -> the upstream module it is bound to (`import optuna`, `import datasets as ds`)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in UPSTREAM:
                    modules[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}  # a chain is judged whole, once
    for node in ast.walk(tree):
        problem = None
        if isinstance(node, ast.Import):
            problem = next(filter(None, (_module_problem(a.name, []) for a in node.names)), None)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            problem = _module_problem(node.module, [a.name for a in node.names])
        elif isinstance(node, ast.Attribute):
            if _private(node.attr) and node.attr not in own and node.attr not in STDLIB_PRIVATE:
                problem = f"uses the private attribute .{node.attr}"
            elif node.attr == "__dict__":
                problem = "reads .__dict__ (an object's undocumented state)"
            elif node.attr in UNDOCUMENTED:
                problem = f"uses .{node.attr}, which transformers does not document"
            elif node.attr == "layers" and _CACHE.search(ast.unparse(node.value)):
                problem = "uses a cache's .layers, which transformers does not document"
            elif isinstance(node.ctx, ast.Load) and id(node) not in inner:
                problem = _chain_problem(node, modules)
        elif isinstance(node, ast.Call):
            name = _name_arg(node)
            if name and ((_private(name) and name not in own and name not in STDLIB_PRIVATE) or name in UNDOCUMENTED):
                problem = f"{node.func.id}(…, {name!r}) reaches a private or undocumented attribute"  # type: ignore[attr-defined]
            elif any(k.arg and _private(k.arg) and k.arg not in own for k in node.keywords):
                problem = f"passes the private keyword {next(k.arg for k in node.keywords if k.arg and _private(k.arg))}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            named = [a.arg for a in _keyword_parameters(node.args) if _private(a.arg) and a.arg not in own]
            problem = f"declares the private parameter {named[0]} (an upstream keyword it takes)" if named else None
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.match(node.value):
            if node.value not in PUBLIC and _is_module(node.value):
                problem = f"names the internal module {node.value} in a string"
        if problem:
            yield f"{where}:{node.lineno}: {problem}"


def scan(files: list[Path]) -> list[str]:
    trees = {p: ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in files}
    own = own_private_names(list(trees.values()))
    return [use for path, tree in trees.items() for use in private_uses(path, tree, own)]


def test_no_upstream_internal_is_used_outside_compat():
    found = scan(library_files())
    assert found == [], "upstream internals outside judgetrain/compat/ (move each into a compat function " \
                        "with a contract test):\n" + "\n".join(found)


def test_every_rule_fires_on_a_deliberate_fault(tmp_path):
    """Each rule, on a snippet that breaks it; judgetrain's own private names and the public API pass."""
    faults = {
        "from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES": "imports transformers.models.auto",
        "from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling": "imports trl.trainer.sft_trainer",
        "import accelerate.commands.launch": "imports accelerate.commands.launch, not a documented module",
        "from optuna._typing import JSONSerializable": "private name _typing",
        "from transformers.masking_utils import find_packed_sequence_indices": "which its documentation does not show",
        "import datasets\nx = datasets.config.DATASETDICT_JSON_FILENAME": "uses datasets.config, not a documented module",
        "argv = ['python', '-m', 'accelerate.commands.launch']": "names the internal module accelerate.commands.launch",
        "study._storage.get_trial(1)": "private attribute ._storage",
        "x = getattr(processor, '_get_num_multimodal_tokens', None)": "'_get_num_multimodal_tokens'",
        "trainer.save_model(out, _internal_call=True)": "private keyword _internal_call",
        "def save_model(self, out, _internal_call=False): ...": "private parameter _internal_call",
        "state = processor.__dict__": ".__dict__",
        "n = trainer.current_gradient_accumulation_steps": ".current_gradient_accumulation_steps",
        "hasattr(trainer, 'model_accepts_loss_kwargs')": "'model_accepts_loss_kwargs'",
        "layers = out.past_key_values.layers": "a cache's .layers",
        "n = len(parser._actions)": "._actions",
    }
    for source, expected in faults.items():
        path = tmp_path / "fault.py"
        path.write_text(source + "\n")
        found = scan([path])
        assert len(found) >= 1 and any(expected in f for f in found), (source, found)
    fine = ("import optuna\nfrom optuna.trial import TrialState\nimport transformers\nfrom trl import SFTConfig\n"
            "class Own:\n    def __init__(self):\n        self._mine = 1\n    def use(self, other):\n"
            "        return self._mine + other._mine\nos._exit(0)\n"
            "s = optuna.trial.TrialState.COMPLETE\nmodel.layers\nfrom transformers.utils import logging\n")
    (tmp_path / "fine.py").write_text(fine)
    assert scan([tmp_path / "fine.py"]) == []
