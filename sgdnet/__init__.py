"""sgdnet: predict the throughput of distributed SGD with stochastic timed Petri nets.

The curated public API. Subsystems add their names here explicitly (no ``import *``).
"""

from __future__ import annotations

from . import analysis, limits, metrics, models, units, variants
from ._version import __version__  # noqa: E402
from .accuracy import Schedule, Target, TimeToAccuracy, replay, schedule_of, time_to_accuracy
from .anchor import Anchor, anchor_profile
from .choose import choose, pareto_front
from .dists import (
    Deterministic,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    Normal,
    ShiftedExponential,
    Straggler,
    Uniform,
)
from .engine import simulate
from .errors import (
    AnalysisError,
    CalibrationError,
    ClusterError,
    DeadlockError,
    DistributionError,
    NetError,
    NotEventGraphError,
    ProfileError,
    SgdnetError,
    SimulationError,
    StudyError,
    TestbedError,
    UnitError,
    UnknownNameError,
    VariantError,
)
from .net import Net
from .net.compiled import compile_net
from .pipeline_metrics import PipelineReport, pipeline_report
from .plan_search import PlanStudy, best_plans
from .prediction import (
    Prediction,
    ScalingPoint,
    WorkerFigures,
    apply_framework,
    predict,
    scaling,
)
from .results import Estimate, GateStats, Result
from .study import Study
from .variants.coarse import Heuristics as CoarseHeuristics
from .workload import (
    Cluster,
    ClusterFile,
    Device,
    Layer,
    ModelProfile,
    Tensor,
    Topology,
    load_cluster_file,
    retime,
)
from .workload.cost import cost_per_million, training_samples
from .workload.instances import Instance, cluster_from_instance, get_instance, instance_names
from .workload.memory import (
    DeviceMemoryError,
    MemoryBreakdown,
    ShardDegrees,
    memory_per_gpu,
    shard_degrees,
)
from .workload.optimizer import optimizer_step_seconds, with_optimizer
from .workload.parallelism import Parallelism
from .workload.stragglers import MarkovSlowdown, StepSlowdown

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
