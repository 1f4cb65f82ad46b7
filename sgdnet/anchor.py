"""Anchor a profile on the one-GPU throughput a user has measured (or read) before renting.

A published benchmark, or a user's own run, gives the training throughput of the job on *one*
GPU. :func:`anchor_profile` rescales a profile (built-in, architecture-built or measured on
another device) so that sgdnet's prediction of that same job on one GPU, with the same
variant, framework options and node, equals the measured rate; the multi-GPU prediction then
starts from exactly what the user knows. Only the compute is rescaled (uniformly, by one speed
factor: :meth:`ModelProfile.scaled`); gradient bytes, the per-layer split of the time, the
cluster's links and the framework's options stay as given.

Why not simply ``batch / rate``: the one-GPU run is not pure compute. TensorFlow's
``parameter_server`` mode with ``local_parameter_device=cpu`` copies every variable over PCIe
each step, a PS on another host pulls and pushes over the NIC, an input pipeline may be the
bottleneck; solving for the speed that makes the one-GPU *prediction* match keeps those costs
in the model instead of folding them into the compute a second time.

The solve: the one-GPU step time is ``compute / speed + what does not scale`` (transfers,
a PS update, latencies) as long as the critical path does not change, so ``1 / rate`` is affine
in ``1 / speed``; the first step is ``speed <- speed * target / predicted`` (exact when only
compute is on the path), the next ones the secant through the last two predictions (exact when
the path is fixed). ``tol`` is relative; at most ``max_iter`` predictions, each a deterministic
one-GPU run; a step that leaves the bracket of speeds known to be too slow and too fast
(the critical path changed: a Horovod cycle tick moved, another link became the bottleneck)
bisects the bracket instead (and from the fourth prediction on, bisection only), so the solve
also ends where the rate is only piecewise affine; where the rate jumps over the target, the
closer side of the jump is returned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import VariantError
from .prediction import predict
from .variants.inputs import resolve_cluster, resolve_model
from .workload import Cluster, ModelProfile

__all__ = ["Anchor", "anchor_profile", "one_gpu_cluster"]


@dataclass(frozen=True)
class Anchor:
    """The result of :func:`anchor_profile`.

    Attributes
    ----------
    profile : ModelProfile
        The rescaled profile (``profile.batch_size`` is the per-GPU batch).
    speed : float
        The factor the input profile's times were divided by.
    samples_per_s : float
        The one-GPU prediction with ``profile`` (equals the target within ``tol``).
    target : float
        The one-GPU throughput it was anchored on, samples/s.
    iterations : int
        Predictions made.
    """

    profile: ModelProfile
    speed: float
    samples_per_s: float
    target: float
    iterations: int


def one_gpu_cluster(cluster: Cluster) -> Cluster:
    """The cluster of one GPU of the same node: one worker; with a topology, a node of one GPU
    with the node's links (intra-node, PCIe, NIC), so that what the one-GPU job crosses (a PS
    on the host CPU, the node's input pipeline) stays in the model."""
    topo = cluster.topology
    changes: dict[str, Any] = {"workers": 1, "speeds": None}
    if topo is not None:
        one: dict[str, Any] = {"gpus_per_node": 1, "nics_per_node": 1}
        if topo.node_nic_bandwidth is not None:
            one["node_nic_bandwidth"] = topo.node_nic_bandwidth[:1]
        if topo.pcie_switch_gpus:
            one["pcie_switch_gpus"] = 1  # the GPU alone behind its switch
        t = topo.replace(**one)
        changes["topology"] = t
    if cluster.ps_placement == "colocated":
        changes["ps_shards"] = 1
    return cluster.replace(**changes)


def anchor_profile(variant: str, model: str | ModelProfile, cluster: Cluster | Mapping[str, Any],
                   samples_per_s: float, *, batch_size: int | None = None,
                   granularity: str = "fine", tol: float = 1e-4, max_iter: int = 40,
                   **options: Any) -> Anchor:
    """Rescale ``model`` so that ``variant`` on one GPU of ``cluster`` runs at ``samples_per_s``.

    Parameters
    ----------
    variant : str
        The variant the multi-GPU job will be predicted with (its one-GPU net is solved for).
    model : str or ModelProfile
        Built-in name, profile path or profile.
    cluster : Cluster or dict
        The multi-GPU cluster; its one-GPU form is :func:`one_gpu_cluster`.
    samples_per_s : float
        The measured one-GPU throughput (samples per second at ``batch_size`` per GPU).
    batch_size : int, optional
        Per-GPU batch of the measurement (default the profile's).
    granularity : {"fine", "coarse"}
        As in :func:`sgdnet.predict`.
    tol : float
        Relative tolerance on the one-GPU rate.
    max_iter : int
        Most predictions to make.
    **options
        The variant's options, as they will be passed to :func:`sgdnet.predict`.

    Returns
    -------
    Anchor

    Raises
    ------
    VariantError
        ``samples_per_s`` not a positive finite number, or no speed reaches it within
        ``max_iter`` predictions (e.g. the one-GPU job is bound by something other than compute
        that already runs slower than the target: the message says which rate was reached).
    """
    if isinstance(samples_per_s, bool) or not isinstance(samples_per_s, (int, float)) or not (
            math.isfinite(samples_per_s) and samples_per_s > 0):
        raise VariantError(f"anchor_profile: samples_per_s={samples_per_s!r} must be the "
                           "measured one-GPU throughput, a positive number of samples/s")
    prof = resolve_model(model)
    if batch_size is not None:
        prof = prof.scaled(batch_size=batch_size)
    one = one_gpu_cluster(resolve_cluster(cluster)).replace(compute_cv=0.0, comm_cv=0.0,
                                                            straggler=None)
    target = float(samples_per_s)
    # first guess: the profile's pure-compute rate (batch / step time) made the target
    speed = target * prof.step_s / prof.batch_size if prof.step_s > 0 else 1.0
    rate = math.nan
    prev: tuple[float, float] | None = None  # (1/speed, 1/rate) of the previous prediction
    lo, hi = 0.0, math.inf  # speeds known to give a rate below / above the target
    best: tuple[float, float] | None = None  # (speed, rate) closest to the target so far
    for it in range(1, max_iter + 1):
        scaled = prof.scaled(speed=speed)
        p = predict(variant, scaled, one, granularity=granularity, steps=20, warmup=5,
                    replications=1, seed=0, parallel=False, samples=False, **options)
        rate = float(p.samples_per_s.mean)
        if abs(rate / target - 1) <= tol:
            return Anchor(scaled, speed, rate, target, it)
        if rate < target:
            lo = max(lo, speed)
        else:
            hi = min(hi, speed)
        if best is None or abs(rate / target - 1) < abs(best[1] / target - 1):
            best = (speed, rate)
        if lo > 0 and hi < math.inf and hi / lo - 1 < 1e-9:
            # the rate jumps over the target (a step of the critical path, e.g. a Horovod
            # cycle tick): no speed gives it exactly; the closest side is the answer
            return Anchor(prof.scaled(speed=best[0]), best[0], best[1], target, it)
        # the step time is affine in 1/speed (compute / speed + what does not scale): the
        # secant through the last two predictions solves it exactly in that case
        x, y = 1.0 / speed, 1.0 / rate
        nxt = speed * target / rate
        if prev is not None and prev[0] != x:
            slope = (y - prev[1]) / (x - prev[0])
            if slope > 0:
                cand = x + (1.0 / target - y) / slope
                if cand > 0:
                    nxt = 1.0 / cand
        prev = (x, y)
        if hi < math.inf and lo > 0 and it >= 4:
            nxt = 0.5 * (lo + hi)  # the secant has had its chance: bisect the bracket
        elif not lo < nxt < hi and hi < math.inf:
            # a step that leaves the bracket (the critical path changed, e.g. a cycle tick
            # of Horovod's fusion moved): bisect the bracket instead
            nxt = 0.5 * (lo + hi) if lo > 0 else 0.5 * hi
        speed = nxt
    raise VariantError(f"anchor_profile: after {max_iter} predictions the one-GPU job runs at "
                       f"{rate:.4g} samples/s, not the measured {target:.4g}; its step is "
                       "bound by something other than compute (check the cluster's one-GPU "
                       "links and the variant's options), or raise max_iter")
