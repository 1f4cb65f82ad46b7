"""Memory budget of fine nets: estimate a net's size before building it and, when it would not
fit, fall back to coarser layer groups (:func:`.layers.group_layers`), saying so.

A built and compiled net takes about :data:`BYTES_PER_ELEMENT` bytes per place and transition
(measured: 1.6-1.75 KB for fine sync-ps and allreduce nets of ResNet-50, 1.2-1.3 KB for
sync-ps with 16 shards; RSS growth over build and compile). A fine net grows linearly in the
layers of its profile, so two small probe builds on the real cluster — with ``k`` and ``2k`` of
the profile's layers, evenly spaced, so their sizes (hence their pieces and buckets) are
representative — give the elements per layer and the fixed part; the estimate is their line at
the profile's layer count. Probes run only when ``workers x layers >= PROBE_FROM`` (below that
a net is far under any sensible budget).

On a large cluster the size is counted on smaller ones instead (:class:`ElementCounter`): when
every worker adds the same sub-net (parameter-server nets, a flat ring in pipelined form), a net's
places and transitions are a linear function of the workers, so builds of the whole profile on
clusters of ``b``, ``2b`` and ``3b`` workers of the same kind give the count at the real size
exactly — no sampled layers (whose pieces per layer need not be the average: -26 % for 16
shards on 256 GPUs) and at a fraction of a probe's cost. Two checks keep it exact: the three
counts must lie on a line, and a one-layer build on the real cluster must equal its
extrapolation (a builder choice that changes between the small clusters and the real one fails
it). When either fails (an unrolled ring grows with the square of its members), or the cluster
cannot be shrunk (a straggler model), the two probes are built on the real cluster as before.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ..errors import SgdnetError, SimulationError
from ..limits import limit
from ..units import format_bytes
from ..workload import Cluster, ModelProfile
from .layers import group_layers

__all__ = ["BYTES_PER_ELEMENT", "MARGIN", "PROBE_FROM", "SCALE_FROM", "ElementCounter", "announce",
           "estimate_elements", "fallback_message", "fit_layer_groups", "fit_profile", "run_work_floor",
           "check_run_work_early", "spec_work_check"]

#: Resident bytes of one place or transition of a built and compiled net (measured, rounded up).
BYTES_PER_ELEMENT = 1800

#: Probe only when ``workers * layers`` is at least this.
PROBE_FROM = 8192

#: Fraction of the budget a fallback aims at (the estimate's error is up to ~+-35 %).
MARGIN = 0.75

#: Layers of the smaller probe (the larger one has twice as many).
_PROBE_LAYERS = 6

#: Probes are counted on smaller clusters when the real one has at least this many times the
#: smallest one's workers (their three builds then cost at most half of one at full size).
SCALE_FROM = 12


def _sample(model: ModelProfile, k: int) -> ModelProfile:
    """``k`` of the profile's layers, evenly spaced (first and last included)."""
    L = model.n_layers
    idx = sorted({round(j * (L - 1) / (k - 1)) for j in range(k)}) if k > 1 else [0]
    return ModelProfile(model.name, [model.layers[i] for i in idx], model.batch_size,
                        model.device, model.source, model.cv, model.meta)


def _elements(net_or_count: Any) -> int:
    """Places + transitions of a built net (an int is taken as that count already)."""
    if isinstance(net_or_count, int):
        return net_or_count
    return len(net_or_count.places) + len(net_or_count.transitions)


def _probe(count: Callable[[ModelProfile], Any], model: ModelProfile, k: int) -> tuple[int, int]:
    """``(layers, places + transitions)`` of the probe with ``k`` of the model's layers."""
    sub = _sample(model, k)
    return sub.n_layers, _elements(count(sub))


def _smaller_clusters(cluster: Cluster) -> tuple[Cluster, ...]:
    """Clusters of ``b``, ``2b`` and ``3b`` workers of ``cluster``'s kind, or ``()``.

    ``b`` is a whole number of racks (leaf-spine) or nodes (a topology), or at least four hosts,
    and at least the colocated shards' hosts (a size where some part is special, such as one
    node with no traffic between nodes, is off the line of the next two, which the counts
    check). Speeds and per-node NIC rates, which change durations but not the net's elements,
    are dropped; a straggler model (it may add elements to some workers) or a cluster under
    :data:`SCALE_FROM` times ``b`` gives ``()``.
    """
    if cluster.straggler is not None:
        return ()
    t = cluster.topology
    shards = cluster.ps_shards if cluster.ps_placement == "colocated" else 1
    if t is None:
        unit, need = 1, max(4, shards)
    else:
        unit = t.gpus_per_node * (t.rack_nodes if t.fabric == "leaf-spine" else 1)
        need = t.gpus_per_node * shards
    b = unit * -(-need // unit)
    if cluster.workers < SCALE_FROM * b:
        return ()
    topo = None if t is None else dataclasses.replace(t, node_nic_bandwidth=None)
    try:
        return tuple(cluster.replace(workers=k * b, speeds=None, topology=topo)
                     for k in (1, 2, 3))
    except SgdnetError:
        return ()


def _extrapolate(counts: list[int], b: int, workers: int) -> int | None:
    """The line through the counts at ``b``, ``2b`` and ``3b`` workers, at ``workers``; ``None``
    when they are not on a line or the value is not a whole number."""
    e0, e1, e2 = counts
    if e2 - 2 * e1 + e0:
        return None
    n = e0 + Fraction(workers - b, b) * (e1 - e0)
    return int(n) if n.denominator == 1 else None


class ElementCounter:
    """Places + transitions of ``build(model, cluster)``, counted on smaller clusters when that
    is exact (see the module docstring), else by building on ``cluster``.

    Parameters
    ----------
    build : callable
        ``build(model, cluster)`` makes the net of a profile on a cluster.
    cluster : Cluster
        The real cluster.

    Attributes
    ----------
    scaled : bool or None
        Whether counts come from the smaller clusters (``None`` before the first count).
    """

    def __init__(self, build: Callable[[ModelProfile, Cluster], Any], cluster: Cluster) -> None:
        self._build = build
        self._cluster = cluster
        self._small: tuple[Cluster, ...] | None = None
        self.scaled: bool | None = None

    def _on_small(self, model: ModelProfile) -> int | None:
        counts = [_elements(self._build(model, c)) for c in self._small]
        return _extrapolate(counts, self._small[0].workers, self._cluster.workers)

    def _decide(self, model: ModelProfile) -> None:
        """Count on the smaller clusters only if a one-layer net built on the real cluster has
        its extrapolated size (the builders choose alike at both sizes)."""
        self._small = _smaller_clusters(self._cluster)
        if self._small:
            one = _sample(model, 1)
            try:
                n = self._on_small(one)
            except SgdnetError:  # e.g. an option valid at the real size only (backups=10)
                n = None
            if n is None or n != _elements(self._build(one, self._cluster)):
                self._small = ()
        self.scaled = bool(self._small)

    def exact(self, model: ModelProfile) -> int | None:
        """The count of ``model``'s net from the smaller clusters, or None (they are not used,
        or this profile's counts are off their line)."""
        if self._small is None:
            self._decide(model)
        return self._on_small(model) if self._small else None

    def __call__(self, model: ModelProfile) -> int:
        n = self.exact(model)
        return _elements(self._build(model, self._cluster)) if n is None else n


def _line(model: ModelProfile, probes: tuple[tuple[int, int], tuple[int, int]]) -> int:
    """The probes' line at the model's layer count (never below the larger probe)."""
    (k1, e1), (k2, e2) = probes
    per_layer = (e2 - e1) / (k2 - k1)
    return max(e2, round(e1 + per_layer * (model.n_layers - k1)))


def estimate_elements(count: Callable[[ModelProfile], Any], model: ModelProfile,
                      reuse: tuple[tuple[int, int], tuple[int, int]] | None = None,
                      probes_out: list | None = None) -> int:
    """Places + transitions of ``count(model)``: exact when ``count`` has an ``exact`` method
    that gives it (an :class:`ElementCounter` counting on smaller clusters) or when the model has
    at most twice :data:`_PROBE_LAYERS` layers, else extrapolated from two probes with
    :data:`_PROBE_LAYERS` and twice as many of the model's layers.

    Parameters
    ----------
    count : callable
        The net of a profile, or its places + transitions (e.g. an :class:`ElementCounter`).
    model : ModelProfile
        The profile whose net is estimated.
    reuse : pair of (layers, elements) or None
        The probes of an earlier estimate on a profile of the same kind (the same model with
        its layers grouped differently). When the smaller probe of ``model`` lands exactly on
        the smaller of ``reuse`` (same layers, same elements) and ``reuse``'s elements are
        proportional to its layers (no part shared between layers, such as all-reduce
        buckets), the larger probe is assumed to land on the larger one too and is not built:
        the estimate is ``reuse``'s line at ``model``'s layer count. This assumes that what
        changes between the two profiles (layer sizes and times) changes the elements per layer
        of every probe alike or not at all, as for nets whose pieces, buckets and transfers per
        layer do not depend on the layers' sizes.
    probes_out : list or None
        When given, the probes used are appended to it (nothing for an exact count).

    Returns
    -------
    int
        The estimated number of places and transitions.
    """
    exact = getattr(count, "exact", None)
    n = None if exact is None else exact(model)
    if n is not None:
        return n
    if model.n_layers <= 2 * _PROBE_LAYERS:
        return _elements(count(model))
    first = _probe(count, model, _PROBE_LAYERS)
    if reuse is not None and first == reuse[0] and reuse[1][1] * first[0] == first[1] * reuse[1][0]:
        probes = (first, reuse[1])
    else:
        probes = (first, _probe(count, model, 2 * _PROBE_LAYERS))
    if probes_out is not None:
        probes_out.extend(probes)
    return _line(model, probes)


def _group_down(count: Callable[[ModelProfile], Any], model: ModelProfile, default_cv: float,
                est: float, budget: float, reuse: tuple | None) -> tuple[int, float]:
    """``(groups, estimated bytes)`` of the first number of layer groups of ``model`` whose
    estimate fits :data:`MARGIN` of ``budget``: from ``est`` (its bytes at full depth), then
    down in proportion to each grouped estimate's excess, by one at least."""
    L = model.n_layers
    groups = max(1, min(L - 1, math.floor(L * budget / est * MARGIN)))
    while True:
        g_est = estimate_elements(count, group_layers(model, groups, default_cv), reuse=reuse)
        if g_est * BYTES_PER_ELEMENT <= budget * MARGIN or groups == 1:
            return groups, g_est * BYTES_PER_ELEMENT
        groups = max(1, min(groups - 1,
                            math.floor(groups * budget * MARGIN / (g_est * BYTES_PER_ELEMENT))))


def fit_layer_groups(count: Callable[[ModelProfile], Any], model: ModelProfile, workers: int,
                     default_cv: float) -> tuple[int | None, dict | None]:
    """The ``max_layers`` a fine net must use to fit the budget ``limit("max_net_bytes")``.

    Returns ``(None, None)`` when the net at full depth fits (or is too small to probe), else
    ``(groups, note)``: a number of layer groups whose estimated size fits :data:`MARGIN` of
    the budget (the first from the full-depth estimate's ratio, then down in proportion to each
    grouped estimate's excess, by one at least), and a dict describing the fallback for
    :func:`announce`. The estimate is exact when ``count`` counts on smaller clusters
    (:class:`ElementCounter`); from two probes it is within about +-20 % for PS and layer-wise
    nets (tests/test_budget.py) and can miss more where buckets, not layers, set the size (a
    107-layer all-reduce in 4 buckets: -34 %), hence the margin (a resident byte per element
    also varies by net: 1.2-1.75 KB measured).
    """
    _, groups, note = fit_profile(count, model, workers, default_cv)
    return groups, note


def fit_profile(count: Callable[[ModelProfile], Any], model: ModelProfile, workers: int,
                default_cv: float, compact: ModelProfile | None = None
                ) -> tuple[ModelProfile, int | None, dict | None]:
    """:func:`fit_layer_groups` with a first fallback: ``(profile, max_layers, note)``.

    ``compact`` is ``model`` with some layers merged into a net that is much smaller for what
    it merges (:func:`.layers.merge_small_layers` at a sharded parameter server's
    ``shard_min_bytes``: every group is split over all shards, so the fine ``sync-ps`` net
    carries each group as one flow group). When ``model``'s net at full depth would not fit,
    ``compact`` is built instead if its net fits :data:`MARGIN` of the budget, else
    ``compact`` grouped down as :func:`fit_layer_groups` groups ``model``; the note says
    ``merged_small``. Without ``compact`` (or one that merges nothing) this is
    :func:`fit_layer_groups` on ``model``.
    """
    L = model.n_layers
    if workers * L < PROBE_FROM:
        return model, None, None
    budget = limit("max_net_bytes")
    probes: list = []
    est = estimate_elements(count, model, probes_out=probes) * BYTES_PER_ELEMENT
    if est <= budget:
        return model, None, None
    note = {"layers": L, "estimated_bytes": est, "budget_bytes": budget}
    if compact is not None and compact.n_layers < L:
        base, groups, note["merged_small"] = compact, None, True
        g_bytes = estimate_elements(count, compact) * BYTES_PER_ELEMENT
        if g_bytes > budget * MARGIN:
            groups, g_bytes = _group_down(count, compact, default_cv, g_bytes, budget, None)
    else:
        base = model
        groups, g_bytes = _group_down(count, model, default_cv, est, budget,
                                      (probes[0], probes[1]) if probes else None)
    note.update(layer_groups=groups or base.n_layers, estimated_bytes_grouped=g_bytes)
    return base, groups, note


def announce(note: dict, elements: int, what: str) -> None:
    """Record the built net's size in ``note`` (``built_bytes``: its places and transitions at
    :data:`BYTES_PER_ELEMENT`) and warn that ``what`` fell back to coarser layer groups."""
    note["built_bytes"] = elements * BYTES_PER_ELEMENT
    warnings.warn(fallback_message(note, what), stacklevel=4)


def fallback_message(note: dict, what: str) -> str:
    """The warning of :func:`announce` for ``note`` (a net's ``meta["layer_fallback"]``, its
    ``built_bytes`` recorded): also what the CLI says of a net loaded from its cache, whose
    build (and warning) happened in an earlier run."""
    how = f"merged into {note['layer_groups']} groups"
    if note.get("merged_small"):
        how += " of at least shard_min_bytes of gradients each (every group split over all shards)"
    return (f"{what}: the fine net of all {note['layers']} layers would take "
            f"~{format_bytes(note['estimated_bytes'])}, over the memory budget of "
            f"{format_bytes(note['budget_bytes'])} (max_net_bytes), so it was built with its "
            f"layers {how} (~{format_bytes(note['built_bytes'])}); "
            "pass max_layers=N to choose the groups, granularity='coarse', or raise the budget "
            "with SGDNET_MAX_NET_BYTES=N")


def run_work_floor(build: Callable[..., Any], cluster: Cluster, step_completions: int,
                   replications: int, *, fine: bool) -> dict | None:
    """A lower bound of what ``simulate``'s run-size check (``engine.api.check_run_work``:
    transitions x ``ceil(step_completions / step transitions)`` x runs) will count for the net
    of ``build`` on ``cluster``, found without building that net (issue #43: at 65,536 workers
    the build alone took minutes before the check could refuse the run).

    The net is built on the clusters of :func:`_smaller_clusters` (``b``, ``2b``, ``3b``
    workers of the same kind) with one layer group (``fine``: ``build(cluster,
    one_group=True)``; the memory budget never makes fewer, and every layer group adds
    transitions), and its transitions and step transitions are extrapolated along their line
    to the real workers: transitions as ``slope x workers`` (below the line for a positive
    intercept), step transitions as the line or ``slope x workers``, whichever is larger (an
    upper bound, so its share of the steps is a lower one); runs are 1 for a net without
    randomness (``simulate`` plays it once), else ``replications``. This assumes what
    :class:`ElementCounter` checks: a builder whose pieces per worker are the same at the small
    sizes and at the real one.

    Parameters
    ----------
    build : callable
        ``build(cluster, one_group)`` makes the variant's net on ``cluster``.
    cluster : Cluster
        The real cluster.
    step_completions : int
        Step completions the run counts (``(steps + warmup) x workers``, as ``predict`` passes).
    replications : int
        Replications asked for.
    fine : bool
        Whether the net is fine-grained (its layers can be grouped by the memory budget).

    Returns
    -------
    dict or None
        ``{"completions", "transitions", "steps", "runs", "small"}`` (the bound and its
        factors, ``small`` the worker counts counted on); None when no bound is known (a cluster
        too small to shrink, a straggler model, counts off their line, or a build that fails
        on the small clusters, e.g. an option valid at the real size only: the real build
        reports its own errors).
    """
    import warnings

    from ..net.compiled import compile_net

    small = _smaller_clusters(cluster)
    if not small:
        return None
    counts, steps, det = [], [], True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for c in small:
                net = build(c, fine)
                counts.append(len(net.transitions))
                steps.append(sum(1 for t in net.transitions.values() if t.tags.get("step")))
                det = det and compile_net(net, share=False).deterministic
    except Exception:  # noqa: BLE001 - no bound; the real build reports its own errors
        return None
    b, n = small[0].workers, cluster.workers
    if _extrapolate(counts, b, n) is None or _extrapolate(steps, b, n) is None:
        return None
    t_slope = Fraction(counts[1] - counts[0], b)
    t_low = min(t_slope * n, counts[0] + t_slope * (n - b))
    s_slope = Fraction(steps[1] - steps[0], b)
    s_high = max(s_slope * n, steps[0] + s_slope * (n - b))
    if t_low <= 0 or s_high <= 0:
        return None
    t_low, s_high = math.floor(t_low), math.ceil(s_high)
    runs = 1 if det else replications
    per = -(-step_completions // s_high)
    return {"completions": t_low * per * runs, "transitions": t_low, "steps": per, "runs": runs,
            "small": [c.workers for c in small]}


def check_run_work_early(build: Callable[..., Any], cluster: Cluster, step_completions: int,
                         replications: int, *, fine: bool, what: str) -> None:
    """Refuse, before the net is built, a run whose :func:`run_work_floor` is beyond the
    ``max_run_events`` limit: what ``simulate`` would refuse after the build (the same limit and
    advice), never a run it would allow.

    Raises
    ------
    SimulationError
        Naming the configuration (``what``), the bound and its factors, the limit and the fix.
    """
    lim = limit("max_run_events")
    floor = run_work_floor(build, cluster, step_completions, replications, fine=fine)
    if floor is None or floor["completions"] <= lim:
        return
    small = "/".join(map(str, floor["small"]))
    raise SimulationError(
        f"{what}: this run would play at least {floor['completions']:.3g} completions "
        f"(at least {floor['transitions']:,} transitions x {floor['steps']:,} steps x "
        f"{floor['runs']} replications, counted on clusters of {small} workers), beyond the "
        f"limit {lim:.3g} (max_run_events: hours of simulation); refused before building the "
        "net: use fewer workers, steps or replications, granularity='coarse', or raise the "
        "limit with SGDNET_MAX_RUN_EVENTS=N if it is deliberate")


def spec_work_check(spec: Any, model: ModelProfile, cluster: Cluster, granularity: str,
                    options: dict, steps: int, warmup: int, replications: int) -> None:
    """:func:`check_run_work_early` for ``spec.build(model, cluster, granularity, **options)``
    run ``steps`` + ``warmup`` steps per worker (as :func:`sgdnet.predict` counts them).

    Raises
    ------
    SimulationError
        The run is refused (see :func:`check_run_work_early`).
    """
    grouped = granularity == "fine" and "max_layers" in spec.option_names() \
        and options.get("max_layers") is None

    def build(c: Cluster, one_group: bool) -> Any:
        opts = dict(options)
        if one_group and grouped:
            opts["max_layers"] = 1
        return spec.build(model, c, granularity, **opts)

    check_run_work_early(build, cluster, (steps + warmup) * cluster.workers, replications,
                         fine=grouped,
                         what=f"{spec.name} ({granularity}) on workers={cluster.workers:,}")
