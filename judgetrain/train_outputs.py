"""What a training run leaves behind and how it reports: checkpoints marked
complete once fully written (so ``resume_from_checkpoint: auto`` skips one cut
short by a kill), wandb / TensorBoard set-up, the resolved recipe and the model
card written next to the adapter.

Used by ``judgetrain.train``. README: "`judgetrain train`".
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from judgetrain.io import write_text

__all__ = [
    "COMPLETE_MARKER",
    "RECIPE_FILE",
    "checkpoint_complete_callback",
    "configure_reporting",
    "find_resume_checkpoint",
    "resolved_recipe",
    "wandb_netrc_configured",
    "write_model_card",
]

logger = logging.getLogger("judgetrain.train")
COMPLETE_MARKER = "judgetrain_checkpoint_complete.json"
RECIPE_FILE = "judgetrain_recipe.yaml"


# --------------------------------------------------------------------------- checkpoints


def checkpoint_complete_callback(recipe: dict | None = None):
    """A ``TrainerCallback`` that writes into each checkpoint, once it is saved, the
    resolved ``recipe`` it was trained with (``RECIPE_FILE``; what a resume is checked
    against, ``judgetrain.train_resume``) and then ``COMPLETE_MARKER`` with the step,
    world size and global batch."""
    import yaml
    from transformers import TrainerCallback

    class CheckpointComplete(TrainerCallback):
        """Marks a checkpoint complete once the Trainer has written all of it
        (model, optimizer, scheduler, RNG state, trainer state): a run killed
        mid-save leaves a folder without the marker, which resume skips."""

        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                if folder.is_dir():
                    if recipe is not None:
                        write_text(folder / RECIPE_FILE, yaml.safe_dump(recipe, sort_keys=True))
                    global_batch = args.world_size * args.per_device_train_batch_size * args.gradient_accumulation_steps
                    write_text(folder / COMPLETE_MARKER, json.dumps({"global_step": state.global_step, "world_size": args.world_size,
                                                                       "global_batch": global_batch}))
            return control

    return CheckpointComplete()




def find_resume_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The newest complete ``checkpoint-N`` in ``output_dir`` (None if none);
    incomplete ones (killed mid-save) are skipped with a warning."""
    out = Path(output_dir)
    if not out.is_dir():
        return None
    found = sorted((int(p.name.split("-")[1]), p) for p in out.glob("checkpoint-*") if p.name.split("-")[1].isdigit())
    for step, path in reversed(found):
        if (path / COMPLETE_MARKER).is_file() and (path / "trainer_state.json").is_file():
            return str(path)
        logger.warning("%s is incomplete (the run stopped while saving it); resuming from an earlier checkpoint", path)
    return None


# --------------------------------------------------------------------------- logging


def configure_reporting(training_args) -> None:
    """wandb without a configured key logs offline into the output folder
    (sync later with `wandb sync`); the key itself is never printed or saved."""
    report_to = training_args.report_to or []
    if "wandb" in report_to:
        os.environ.setdefault("WANDB_DIR", str(Path(training_args.output_dir).resolve()))
        Path(os.environ["WANDB_DIR"]).mkdir(parents=True, exist_ok=True)
        if not os.environ.get("WANDB_API_KEY") and not wandb_netrc_configured() and os.environ.get("WANDB_MODE") is None:
            os.environ["WANDB_MODE"] = "offline"
            logger.warning("wandb: no API key configured; logging offline to %s (upload later with `wandb sync`)", os.environ["WANDB_DIR"])


def wandb_netrc_configured() -> bool:
    """True when ~/.netrc holds a wandb API key (then runs log online, as `wandb login` left them)."""
    import netrc

    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def resolved_recipe(model_args, data_args, lora_args, training_args, argv: list[str]) -> dict:
    """Every judgetrain field plus the SFTConfig fields that differ from their defaults."""
    from trl import SFTConfig

    recipe: dict[str, Any] = {}
    for obj in (model_args, data_args, lora_args):
        recipe.update(asdict(obj))
    defaults = {f.name: f.default for f in fields(SFTConfig)}
    for f in fields(SFTConfig):
        value = getattr(training_args, f.name)
        if f.name.endswith("_token") or f.name in ("hub_token", "push_to_hub_token"):
            continue  # secrets never go into saved configs
        if f.name in defaults and value != defaults[f.name] and _yamlable(value):
            recipe[f.name] = value.value if hasattr(value, "value") else value
    return recipe


def _yamlable(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool, list, dict)) or hasattr(v, "value")


def write_model_card(out: Path, model_args, family, data_info: dict, argv: list[str], trainer, longest: int) -> None:
    """``out/README.md``: base model, steps and batch, the data with its content hashes, and how to reproduce the run."""
    lines = [
        "---",
        f"base_model: {model_args.model_name_or_path}",
        "library_name: peft" if (out / "adapter_config.json").exists() else "library_name: transformers",
        "tags: [judgetrain, lora, vlm-judge]",
        "---",
        "",
        f"# judgetrain judge: {family.name} fine-tuned on {len(data_info['datasets'])} dataset(s)",
        "",
        f"- base model: `{model_args.model_name_or_path}` ({family.name})",
        f"- steps: {trainer.state.global_step}, epochs: {trainer.state.epoch:.2f}",
        f"- world size: {trainer.args.world_size}, per-device batch: {trainer.args.per_device_train_batch_size}, "
        f"gradient accumulation: {trainer.args.gradient_accumulation_steps} "
        f"(effective batch {trainer.args.world_size * trainer.args.per_device_train_batch_size * trainer.args.gradient_accumulation_steps})",
        f"- longest training record: {longest or 'not measured'} tokens",
        "",
        "## Data (content hashes from each build.json)",
        "",
        "| dataset | builder | split | content hash |",
        "| --- | --- | --- | --- |",
    ]
    for d in data_info["datasets"]:
        for split, h in d["splits"].items():
            lines.append(f"| `{d['path']}` | {d['builder']} {d['version']} | {split} | `{h}` |")
    if data_info.get("left_out"):
        lines += ["", f"Records left out by filters: {data_info['left_out']}"]
    lines += [
        "",
        "## Reproduce",
        "",
        "```bash",
        f"accelerate launch -m judgetrain.train --config {out / RECIPE_FILE}",
        "```",
        "",
        f"Original command: `python -m judgetrain.train {' '.join(shlex.quote(a) for a in argv)}`",
        "",
    ]
    write_text(out / "README.md", "\n".join(lines))
