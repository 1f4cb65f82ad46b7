"""One-node calibration of the host input pipeline: the only calibration of the node model.

The GPUs of a node share its CPU cores (data loading, decoding, augmentation, framework
threads), so ``g`` copies of a single-GPU job on one node deliver less than ``g`` times one
copy alone when the cores cannot keep up. :class:`~sgdnet.workload.topology.Topology` models
that as an input pipeline of ``input_s_per_sample`` CPU-seconds per sample on the node's
``host_cores`` cores (:mod:`sgdnet.variants.input_pipeline`): a node never prepares more than
``host_cores / input_s_per_sample`` samples/s. This module finds the cost that explains a
one-node measurement that uses no multi-GPU training number.

Recipe
    1. Run the single-GPU training job (the model, batch size, precision and input pipeline
       you will train with: real data, not synthetic) on one GPU of an otherwise idle node;
       note its throughput ``X1`` in samples/s (steady state, after warm-up).
    2. Run ``g`` copies of the same job at once, one per GPU of that node (independent
       processes, ``CUDA_VISIBLE_DEVICES=i``, no communication between them); note the sum of
       their throughputs ``Xg``.
    3. ``sgdnet.workload.node.calibrate_input_pipeline(X1, Xg, g, host_cores)`` returns the
       :class:`NodeCalibration`; :func:`write_node_calibration` writes it into a cluster file's
       ``topology:`` section (``sgdnet calibrate``'s format, :mod:`.cluster_file`) with the
       raw numbers under ``measurements: {node_calibration: ...}``::

           topology:
             gpus_per_node: 8
             host_cores: 64
             input_s_per_sample: 0.0144     # 64 cores / 4,444 samples/s
             prefetch: 2

    If ``Xg >= g X1 (1 - tolerance)`` the node shows no contention: ``input_s_per_sample`` is
    0 (no pipeline; :attr:`NodeCalibration.bound_s_per_sample` is the largest cost the data
    still allow). Otherwise the pipeline binds with all ``g`` GPUs busy and ``host_cores /
    input_s_per_sample = Xg``. Only the ratio matters for throughput; ``host_cores`` (the
    vendor's core or vCPU count, e.g. 64 vCPUs on p3.16xlarge, 80 threads on DGX-1's two
    20-core Xeon E5-2698 v4) sets how long one batch takes alone.

    The single-GPU profile you predict with should be ``X1``'s (the job alone on one GPU);
    with the pipeline, a node of ``g`` such GPUs is then predicted at ``min(g X1, Xg)`` before
    any communication, and multi-node runs inherit the cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._check import int_arg
from ..errors import ClusterError
from .cluster_file import ClusterFile, load_cluster_file

__all__ = ["NodeCalibration", "calibrate_input_pipeline", "write_node_calibration"]


@dataclass(frozen=True)
class NodeCalibration:
    """What a one-node measurement says about the host input pipeline.

    Attributes
    ----------
    one_gpu, all_gpus : float
        The measured samples/s: one copy alone, and ``gpus`` copies at once (their sum).
    gpus, host_cores : int
    input_s_per_sample : float
        CPU-seconds per sample that explain ``all_gpus`` (0: no contention seen).
    bound_s_per_sample : float
        The largest cost consistent with the measurement: ``host_cores / all_gpus``.
    efficiency : float
        ``all_gpus / (gpus * one_gpu)``.
    """

    one_gpu: float
    all_gpus: float
    gpus: int
    host_cores: int
    input_s_per_sample: float
    bound_s_per_sample: float
    efficiency: float

    def topology_fields(self) -> dict[str, Any]:
        """The ``Topology`` fields to set: ``host_cores`` and ``input_s_per_sample``."""
        return {"host_cores": self.host_cores, "input_s_per_sample": self.input_s_per_sample}

    def to_dict(self) -> dict[str, Any]:
        """Plain fields (the cluster file's ``measurements.node_calibration``)."""
        return {k: getattr(self, k) for k in ("one_gpu", "all_gpus", "gpus", "host_cores",
                                              "input_s_per_sample", "bound_s_per_sample",
                                              "efficiency")}


def _rate(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
            math.isfinite(v) and v > 0):
        raise ClusterError(f"{name}={v!r}: must be a measured throughput in samples/s > 0")
    return float(v)


def calibrate_input_pipeline(one_gpu: float, all_gpus: float, gpus: int, host_cores: int, *,
                             tolerance: float = 0.02) -> NodeCalibration:
    """The input-pipeline cost explaining ``gpus`` single-GPU jobs run at once on one node.

    Parameters
    ----------
    one_gpu : float
        Samples/s of the single-GPU job alone on one GPU of the node.
    all_gpus : float
        Total samples/s of ``gpus`` copies of it at once, one per GPU (no communication).
    gpus : int
        GPUs used in the second run (normally the node's ``gpus_per_node``).
    host_cores : int
        The node's CPU cores (or vCPUs) serving the input pipelines.
    tolerance : float
        Relative shortfall below ``gpus * one_gpu`` taken as measurement noise (0.02: 2%).

    Returns
    -------
    NodeCalibration

    Raises
    ------
    ClusterError
        A throughput not > 0, ``all_gpus`` above ``gpus * one_gpu`` by more than the
        tolerance (the copies cannot together beat each alone), ``all_gpus < one_gpu``, bad
        counts or tolerance.

    Examples
    --------
    >>> c = calibrate_input_pipeline(1000.0, 6800.0, 8, 64)
    >>> round(c.input_s_per_sample, 6), round(c.efficiency, 3)
    (0.009412, 0.85)
    """
    x1, xg = _rate(one_gpu, "one_gpu"), _rate(all_gpus, "all_gpus")
    g = int_arg("gpus", gpus, 1, " (GPUs running a copy at once)", error=ClusterError)
    c = int_arg("host_cores", host_cores, 1, " (the node's CPU cores)", error=ClusterError)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not (
            0 <= tolerance < 1):
        raise ClusterError(f"tolerance={tolerance!r}: must be a fraction in [0, 1) (e.g. 0.02)")
    ideal = g * x1
    if xg > ideal * (1 + tolerance):
        raise ClusterError(f"all_gpus={xg:g} samples/s is more than gpus * one_gpu = {ideal:g}:"
                           " give the sum over the copies of the per-copy throughputs measured "
                           "at the same batch size as one_gpu")
    if xg < x1 * (1 - tolerance):
        raise ClusterError(f"all_gpus={xg:g} samples/s is below one_gpu={x1:g}: give the sum "
                           "of the copies' throughputs, not one copy's")
    bound = c / xg
    s = 0.0 if xg >= ideal * (1 - tolerance) else bound
    return NodeCalibration(x1, xg, g, c, s, bound, xg / ideal)


def write_node_calibration(cluster_file: ClusterFile | str | Path, calibration: NodeCalibration,
                           out: str | Path | None = None) -> ClusterFile:
    """``cluster_file`` with ``calibration`` in its ``topology:`` section (``host_cores``,
    ``input_s_per_sample``), the raw numbers in ``measurements.node_calibration`` and a note;
    saved to ``out`` when given.

    Raises
    ------
    ClusterError
        The file has no ``topology:`` section, or its ``gpus_per_node`` is not the
        calibration's ``gpus``.
    """
    cf = cluster_file if isinstance(cluster_file, ClusterFile) else \
        load_cluster_file(cluster_file)
    if not isinstance(calibration, NodeCalibration):
        raise ClusterError(f"calibration={calibration!r}: must be a NodeCalibration "
                           "(calibrate_input_pipeline's result)")
    t = cf.topology
    if t is None:
        raise ClusterError("the cluster file has no topology: section; add one (gpus_per_node, "
                           "intra, nics_per_node, nic_bandwidth, ...) before the node "
                           "calibration")
    if t.gpus_per_node != calibration.gpus:
        raise ClusterError(f"the calibration ran {calibration.gpus} copies but the topology has "
                           f"gpus_per_node={t.gpus_per_node}; run one copy per GPU of the node")
    note = (f"node calibration: {calibration.gpus} single-GPU jobs at once "
            f"{calibration.all_gpus:g} samples/s vs {calibration.one_gpu:g} alone "
            f"(efficiency {calibration.efficiency:.3f}): input_s_per_sample="
            f"{calibration.input_s_per_sample:.6g} on {calibration.host_cores} cores")
    got = cf.replace(topology=t.replace(**calibration.topology_fields()),
                     measurements={**cf.measurements, "node_calibration": calibration.to_dict()},
                     notes=(*cf.notes, note))
    if out is not None:
        got.save(out)
    return got
