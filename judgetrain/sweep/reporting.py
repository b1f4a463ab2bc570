"""The callback inside a sweep trial's training process: it computes the objective at every
evaluation, reports it to the study, stops training when the pruner says so, and writes
``sweep_result.json``. Imported only by the trial (it imports transformers), never by
``judgetrain sweep --help``. Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from judgetrain.compat.optuna import reopen_trial
from judgetrain.io import write_text
from judgetrain.writer import process_alive

from .space import RESULT_FILE, Objective, SweepError, make_pruner, objective_problems
from .storage import storage_from_url

__all__ = ["SweepCallback", "lookup_metric"]


class SweepCallback(TrainerCallback):
    """Report the objective at every evaluation, stop when the pruner says so, and
    write ``sweep_result.json`` (state, values, step, metrics) when training ends.

    Every rank computes judge metrics over the whole validation set (with a fixed
    batch size), so that ZeRO-3's collective parameter gathers line up; rank 0
    reports and decides, and its decision is broadcast.
    """

    def __init__(self, env: dict, eval_records, processor, training_args):
        self.env = env
        self.objectives = [Objective(n, d) for n, d in env["objectives"]]
        self.records = eval_records
        self.processor = processor
        self.batch_size = training_args.per_device_eval_batch_size
        self.out = Path(training_args.output_dir)
        self.pruned = False
        self.last: dict[str, Any] | None = None  # {"step", "values", "metrics"}
        self._trial = None
        problems = objective_problems(self.objectives, "given" if eval_records is not None else None, training_args.eval_strategy)
        if problems:  # the controller refuses these before the first trial; a trial started otherwise fails with its words
            raise SweepError("; ".join(problems))

    # -- helpers
    def _main(self) -> bool:
        from accelerate import PartialState

        return PartialState().is_main_process

    def trial(self):
        if self._trial is None:
            import optuna

            storage = storage_from_url(self.env["storage"], heartbeat_interval=None)
            study = optuna.load_study(study_name=self.env["study"], storage=storage, pruner=make_pruner(*self.env["pruner"]))
            self._trial = reopen_trial(study, self.env["trial_id"])
        return self._trial

    def _judge_metrics(self, model) -> dict[str, Any]:
        from judgetrain.eval.judge.command import judge_metrics
        from judgetrain.eval.judge.metrics import SUBSETS

        # score only the subsets the objectives read (PRISM-Temporal by default), when they name subsets
        wanted = sorted({o.subset for o in self.objectives if o.is_judge})
        subsets = wanted if all(s in SUBSETS for s in wanted) else None
        return judge_metrics(model, self.processor, self.records, subsets=subsets, batch_size=self.batch_size, progress=False)

    def compute(self, model, eval_metrics: dict[str, float] | None) -> tuple[list[float], dict[str, Any]]:
        judged = self._judge_metrics(model) if any(o.is_judge for o in self.objectives) else {}
        values = []
        for o in self.objectives:
            v = (eval_metrics or {}).get("eval_loss") if o.name == "eval_loss" else lookup_metric(judged, o.subset, o.metric)
            values.append(float("nan") if v is None else float(v))
        return values, {"eval": eval_metrics or {}, "judge": judged}

    def _broadcast(self, obj):
        from accelerate import PartialState
        from accelerate.utils import broadcast_object_list

        if PartialState().num_processes == 1:
            return obj
        box = [obj]
        broadcast_object_list(box, from_process=0)
        return box[0]

    # -- events
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps and args.eval_strategy != "no":
            control.should_evaluate = True  # the final values come from an evaluation at the last step
        pid = int(self.env.get("controller_pid") or 0)
        if pid and not process_alive(pid):
            # the controller died: nobody will read this trial's result, and a rerun re-queues it
            self.last = {"step": state.global_step, "values": None, "metrics": {}, "orphaned": True}
            control.should_training_stop = True
        return control

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        values, details = self.compute(model, metrics)
        self.last = {"step": state.global_step, "values": values, "metrics": details}
        prune = False
        if self._main() and len(self.objectives) == 1 and not math.isnan(values[0]):
            trial = self.trial()
            trial.report(values[0], state.global_step)
            prune = trial.should_prune()
        if self._broadcast(prune):
            self.pruned = True
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if self.last is None or (not self.pruned and not self.last.get("orphaned") and self.last["step"] != state.global_step):
            # no evaluation at the last step: compute the final values now (eval_loss needs an evaluation)
            values, details = self.compute(model, None)
            self.last = {"step": state.global_step, "values": values, "metrics": details}
        if not self._main():
            return control
        state_name = "orphaned" if self.last.get("orphaned") else ("pruned" if self.pruned else "complete")
        result = {
            "state": state_name,
            "step": self.last["step"],
            "values": self.last["values"],
            "objectives": [o.name for o in self.objectives],
            "metrics": self.last["metrics"],
            "trial_number": self.env.get("trial_number"),
        }
        if state_name == "complete" and any(v is None or math.isnan(v) for v in result["values"]):
            result["state"] = "failed"
            result["reason"] = "an objective could not be computed (no evaluation with eval_loss at the last step?)"
        self.out.mkdir(parents=True, exist_ok=True)
        write_text(self.out / RESULT_FILE, json.dumps(result, indent=2, default=_nan_none) + "\n")
        return control


def _nan_none(x):
    return None


def lookup_metric(metrics: dict[str, Any], subset: str, metric: str) -> float | None:
    """``metrics`` of the judge evaluation -> the value of METRIC for SUBSET (``all`` = overall)."""
    from judgetrain.eval.judge.metrics import metric_value

    return metric_value(metrics, subset, metric)
