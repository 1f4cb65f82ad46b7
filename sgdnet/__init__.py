"""sgdnet: predict the throughput of distributed SGD with stochastic timed Petri nets.

The curated public API. Subsystems add their names here explicitly (no ``import *``): each
public name in ``__all__`` is listed in ``_LAZY`` with the submodule that defines it, and is
imported on first use (PEP 562), so ``import sgdnet`` (and the ``sgdnet`` command, which needs a
few subsystems only) does not pay for numba, the variant builders or the study machinery until
they are used. ``from sgdnet import X``, ``sgdnet.X`` and ``from sgdnet import *`` work as
eager imports did.
"""

from __future__ import annotations

import sys as _sys
from types import ModuleType as _ModuleType
from typing import Any as _Any

from ._lazy import attach as _attach
from ._version import __version__

#: the submodule (relative to the package) of each lazily imported public name; "" for a
#: public submodule itself; ``module:attr`` when the public name differs from the attribute's
_LAZY: dict[str, str] = {
    "analysis": "",
    "limits": "",
    "metrics": "",
    "models": "",
    "units": "",
    "variants": "",
    "Schedule": "accuracy",
    "Target": "accuracy",
    "TimeToAccuracy": "accuracy",
    "replay": "accuracy",
    "schedule_of": "accuracy",
    "time_to_accuracy": "accuracy",
    "Anchor": "anchor",
    "anchor_profile": "anchor",
    "choose": "choose",
    "pareto_front": "choose",
    "Deterministic": "dists",
    "Empirical": "dists",
    "Exponential": "dists",
    "Gamma": "dists",
    "LogNormal": "dists",
    "Normal": "dists",
    "ShiftedExponential": "dists",
    "Straggler": "dists",
    "Uniform": "dists",
    "simulate": "engine",
    "AnalysisError": "errors",
    "CalibrationError": "errors",
    "ClusterError": "errors",
    "DeadlockError": "errors",
    "DistributionError": "errors",
    "NetError": "errors",
    "NotEventGraphError": "errors",
    "ProfileError": "errors",
    "SgdnetError": "errors",
    "SimulationError": "errors",
    "StudyError": "errors",
    "TestbedError": "errors",
    "UnitError": "errors",
    "UnknownNameError": "errors",
    "VariantError": "errors",
    "Net": "net",
    "compile_net": "net.compiled",
    "PipelineReport": "pipeline_metrics",
    "pipeline_report": "pipeline_metrics",
    "PlanStudy": "plan_search",
    "best_plans": "plan_search",
    "Prediction": "prediction",
    "ScalingPoint": "prediction",
    "WorkerFigures": "prediction",
    "apply_framework": "prediction",
    "predict": "prediction",
    "scaling": "prediction",
    "Estimate": "results",
    "GateStats": "results",
    "Result": "results",
    "Study": "study",
    "CoarseHeuristics": "variants.coarse:Heuristics",
    "Cluster": "workload",
    "ClusterFile": "workload",
    "Device": "workload",
    "Layer": "workload",
    "ModelProfile": "workload",
    "Tensor": "workload",
    "Topology": "workload",
    "load_cluster_file": "workload",
    "retime": "workload",
    "cost_per_million": "workload.cost",
    "training_samples": "workload.cost",
    "Instance": "workload.instances",
    "cluster_from_instance": "workload.instances",
    "get_instance": "workload.instances",
    "instance_names": "workload.instances",
    "DeviceMemoryError": "workload.memory",
    "MemoryBreakdown": "workload.memory",
    "ShardDegrees": "workload.memory",
    "memory_per_gpu": "workload.memory",
    "shard_degrees": "workload.memory",
    "optimizer_step_seconds": "workload.optimizer",
    "with_optimizer": "workload.optimizer",
    "Parallelism": "workload.parallelism",
    "MarkovSlowdown": "workload.stragglers",
    "StepSlowdown": "workload.stragglers",
}


__getattr__, __dir__ = _attach(__name__, _LAZY)


#: public functions named as the submodule that defines them (``sgdnet.choose``)
_SHADOWED = frozenset(n for n, w in _LAZY.items() if w == n)


class _Package(_ModuleType):
    """The package's module type: importing a submodule binds it on its package (``import
    sgdnet.choose`` sets ``sgdnet.choose``), which must not replace the public function of the
    same name (an eager ``from .choose import choose`` made ``sgdnet.choose`` the function)."""

    def __setattr__(self, name: str, value: _Any) -> None:
        if name in _SHADOWED and isinstance(value, _ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package

__all__ = [
    "__version__",
    "units",
    "limits",
    "models",
    "analysis",
    "ModelProfile",
    "Layer",
    "Tensor",
    "Device",
    "retime",
    "Cluster",
    "ClusterFile",
    "Topology",
    "load_cluster_file",
    "StepSlowdown",
    "MarkovSlowdown",
    "SgdnetError",
    "UnitError",
    "DistributionError",
    "NetError",
    "DeadlockError",
    "SimulationError",
    "AnalysisError",
    "NotEventGraphError",
    "ProfileError",
    "ClusterError",
    "UnknownNameError",
    "VariantError",
    "StudyError",
    "TestbedError",
    "CalibrationError",
    "Study",
    "variants",
    "CoarseHeuristics",
    "predict",
    "scaling",
    "apply_framework",
    "anchor_profile",
    "Anchor",
    "Prediction",
    "ScalingPoint",
    "WorkerFigures",
    "metrics",
    "simulate",
    "Result",
    "Estimate",
    "GateStats",
    "Net",
    "compile_net",
    "Deterministic",
    "Exponential",
    "Uniform",
    "Normal",
    "LogNormal",
    "Gamma",
    "ShiftedExponential",
    "Empirical",
    "Straggler",
    "Schedule",
    "Target",
    "TimeToAccuracy",
    "replay",
    "schedule_of",
    "time_to_accuracy",
    "choose",
    "pareto_front",
    "PipelineReport",
    "pipeline_report",
    "cost_per_million",
    "training_samples",
    "Instance",
    "cluster_from_instance",
    "get_instance",
    "instance_names",
    "DeviceMemoryError",
    "MemoryBreakdown",
    "ShardDegrees",
    "memory_per_gpu",
    "shard_degrees",
    "optimizer_step_seconds",
    "with_optimizer",
    "Parallelism",
    "best_plans",
    "PlanStudy",
]
