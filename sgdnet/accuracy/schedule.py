"""The update schedule of a simulated run: which gradient was computed on which parameter
version, summed over which samples, applied when (and, for local SGD / CoCoD, the local steps
and averaging rounds).

Read from a :class:`~sgdnet.prediction.Prediction` made with ``trace=True`` (warm-up 0, so the
schedule starts at time 0 with the first step of training). The trace is the engine's record of
every firing, so it costs 32 bytes per firing and replication: 2-12 firings per worker step in
coarse nets, 200-730 in fine ResNet-50 nets (:func:`sgdnet.accuracy.time_to_accuracy` sizes
the trace from a probe and simulates one replication at a time when it is large). A lighter
recorder (the trace of the update, pull and step transitions only) needs an engine option
that does not exist yet.

Definitions (the conventions of :mod:`sgdnet.metrics`)
------------------------------------------------------
Version
    The parameters after ``v`` applied updates (version 0: the initial parameters). An
    *update* is a completed group of the server's ``kind="update"`` transitions: for ``sync-ps``
    and ``backup`` the ``c``-th firings of the update transitions without a ``worker`` tag; for
    ``async-ps``, ``ssp`` and ``dssp`` the ``c``-th firings of the update transitions of worker
    ``j`` (one per gradient); with ``aggregation="node"`` the ``c``-th firings of node
    ``m``'s update transitions, each applying the mean of the ``c``-th gradients of the node's
    GPUs, which all read what the node pulled. Fine nets update layer by layer; the whole-model version exists
    when the last piece of its group is applied (the group's latest end). For all-reduce
    variants an update is the end of a round's all-reduces (the ``c``-th firings of the
    collectives' ``*.end`` transitions; the latest step completion of the round without one).
Read version
    Worker ``i``'s gradient of step ``c`` was computed on the versions completed when the last
    piece of its latest pull group (its transfers tagged ``direction="pull"``, ``m``-th
    firings) completed no later than the step started to be sent: the versions whose time is
    no later than that group's latest link-stage start (0 before any pull; a worker without
    pull transfers, its shard on its own host, reads the versions completed when its step's
    first compute started). ``backup``: the pull before the launch of the accepted gradient.
    ``allreduce`` reads version ``c`` at round ``c`` and ``pipe-sgd`` version
    ``c - width + 1`` by construction.
Staleness
    Of a gradient applied by update ``u`` that read version ``r``: ``u - r``, the versions
    applied between its pull and its apply (0 for synchronous SGD).
Samples
    The batch a gradient summed: the worker's batch (``meta["batch_sizes"]``, else the
    profile's batch).
Local rounds (``local-sgd``, ``cocod``)
    Every worker's local steps (time, worker, samples) and, per round ``r``, the time the
    models were averaged (``local-sgd``: the ``r``-th end of the model all-reduce; ``cocod``:
    the ``r``-th merge of the last worker); worker ``i``'s round is ``H_i`` (``k_i``) steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SimulationError, VariantError

__all__ = ["Schedule", "schedule_of", "schedules"]

PS_SYNC = ("sync-ps", "backup")
PS_ASYNC = ("async-ps", "ssp", "dssp")
LOCKSTEP = ("allreduce", "pipe-sgd")
LOCAL = ("local-sgd", "cocod")
VARIANTS = PS_SYNC + PS_ASYNC + LOCKSTEP + LOCAL


@dataclass
class Schedule:
    """The parameter updates of one replication.

    Attributes
    ----------
    kind : {"updates", "local"}
        ``"updates"``: one global parameter sequence (every PS and all-reduce variant);
        ``"local"``: per-worker models averaged in rounds (``local-sgd``, ``cocod``).
    variant : str
        The variant it came from (``"manual"`` for hand-made schedules).
    workers : int
    update_time : numpy.ndarray
        ``(U,)`` seconds: when update ``u`` (making version ``u + 1``) completed.
    grad_update, grad_worker, grad_read, grad_samples : numpy.ndarray
        ``(G,)`` per gradient: the update that applied it, its worker, the version it was
        computed on, the samples it summed. Sorted by update, then worker.
    grad_step : numpy.ndarray
        ``(G,)`` the gradient's index among its worker's applied gradients (its batch's index
        in the worker's sample stream).
    step_time, step_worker, step_samples : numpy.ndarray
        ``kind="local"``: every local step, sorted by time.
    round_steps : numpy.ndarray
        ``kind="local"``: ``(workers,)`` local steps of each worker per round.
    round_time : numpy.ndarray
        ``kind="local"``: ``(R,)`` when round ``r``'s averaging completed.
    averaging : {"average", "cocod"}
        ``kind="local"``: plain model averaging, or CoCoD's delayed merge.
    """

    kind: str
    variant: str
    workers: int
    update_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    grad_update: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    grad_worker: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    grad_read: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    grad_samples: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    grad_step: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    step_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    step_worker: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    step_samples: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    round_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    round_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    averaging: str = "average"

    @property
    def updates(self) -> int:
        """Parameter updates (``kind="updates"``) or local steps (``kind="local"``)."""
        return int(self.update_time.size if self.kind == "updates" else self.step_time.size)

    @property
    def staleness(self) -> np.ndarray:
        """Per gradient: versions applied between its read and its apply (``kind="updates"``)."""
        return self.grad_update - self.grad_read

    def update_samples(self) -> np.ndarray:
        """``(U,)`` samples summed by each update."""
        return np.bincount(self.grad_update, weights=self.grad_samples,
                           minlength=self.updates).astype(np.int64)

    def truncated(self, updates: int) -> Schedule:
        """The first ``updates`` updates (or local steps, whole rounds kept) only."""
        if self.kind == "updates":
            keep = self.grad_update < updates
            return Schedule("updates", self.variant, self.workers, self.update_time[:updates],
                            self.grad_update[keep], self.grad_worker[keep], self.grad_read[keep],
                            self.grad_samples[keep], self.grad_step[keep])
        s = Schedule(**{**self.__dict__})
        s.step_time, s.step_worker, s.step_samples = (
            self.step_time[:updates], self.step_worker[:updates], self.step_samples[:updates])
        return s

    # -------------------------------------------------------------- hand-made schedules
    @classmethod
    def from_reads(cls, reads: Any, workers: Any = None, samples: Any = 32,
                   times: Any = None, variant: str = "manual") -> Schedule:
        """A schedule of one gradient per update: update ``u`` applies a gradient computed on
        version ``reads[u]`` (``0 <= reads[u] <= u``).

        ``workers`` (default all 0) and ``samples`` are per update or one value;
        ``times`` default ``1, 2, ...``.
        """
        r = np.asarray(reads, dtype=np.int64)
        U = r.size
        u = np.arange(U, dtype=np.int64)
        if np.any(r < 0) or np.any(r > u):
            bad = int(np.nonzero((r < 0) | (r > u))[0][0])
            raise VariantError(f"reads[{bad}]={int(r[bad])} must be in 0..{bad}: a gradient is "
                               "computed on a version that exists before its update")
        w = np.zeros(U, dtype=np.int64) if workers is None else np.broadcast_to(
            np.asarray(workers, dtype=np.int64), (U,)).copy()
        b = np.broadcast_to(np.asarray(samples, dtype=np.int64), (U,)).copy()
        t = u + 1.0 if times is None else np.asarray(times, dtype=float)
        step = _per_worker_index(w)
        return cls("updates", variant, int(w.max()) + 1 if U else 1, t, u, w, r, b, step)

    @classmethod
    def synchronous(cls, workers: int, updates: int, samples: Any = 32,
                    period: float = 1.0) -> Schedule:
        """Synchronous SGD: every update sums one gradient of each worker, all computed on the
        previous version (staleness 0)."""
        n, U = int(workers), int(updates)
        gu = np.repeat(np.arange(U, dtype=np.int64), n)
        gw = np.tile(np.arange(n, dtype=np.int64), U)
        b = np.broadcast_to(np.asarray(samples, dtype=np.int64), (n,))
        return cls("updates", "manual", n, period * (np.arange(U) + 1.0), gu, gw, gu.copy(),
                   b[gw].copy(), gu.copy())


def _per_worker_index(w: np.ndarray) -> np.ndarray:
    """Per element: how many earlier elements have the same value."""
    out = np.zeros(w.size, dtype=np.int64)
    seen: dict[int, int] = {}
    for k, x in enumerate(w.tolist()):
        out[k] = seen.get(x, 0)
        seen[x] = out[k] + 1
    return out


# ----------------------------------------------------------------------- trace reading
class _Firings:
    """One replication's trace by transition: completion and start times in completion
    order."""

    def __init__(self, result: Any, rep: int):
        tr = result.trace[result.trace["rep"] == rep]
        tt = tr["transition"].astype(np.int64)
        order = np.argsort(tt, kind="stable")
        ids, first = np.unique(tt[order], return_index=True)
        cuts = np.r_[first, tt.size]
        self.end: dict[int, np.ndarray] = {}
        self.start: dict[int, np.ndarray] = {}
        for j, t in enumerate(ids.tolist()):
            sel = order[cuts[j]:cuts[j + 1]]
            self.end[t] = tr["end"][sel]
            self.start[t] = tr["start"][sel]

    def group(self, ids: list[int], how: str = "max", what: str = "end") -> np.ndarray:
        """Per ``c``: the max (or min) of the ``c``-th times of every transition of ``ids``."""
        src = self.end if what == "end" else self.start
        arrs = [src.get(t, np.zeros(0)) for t in ids]
        if not arrs:
            return np.zeros(0)
        n = min(a.size for a in arrs)
        m = np.vstack([a[:n] for a in arrs]) if n else np.zeros((1, 0))
        return m.max(axis=0) if how == "max" else m.min(axis=0)


def _worker_sets(tags: list[dict], n: int) -> dict[str, list[list[int]]]:
    """Per worker: its step, update, pull (all, and link stages), compute and launch
    transitions."""
    keys = ("step", "update", "pull", "pull_link", "compute", "launch")
    out: dict[str, list[list[int]]] = {k: [[] for _ in range(n)] for k in keys}
    for i, t in enumerate(tags):
        w = t.get("worker")
        if not isinstance(w, (int, np.integer)) or not 0 <= w < n:
            continue
        if t.get("step"):
            out["step"][w].append(i)
        kind = t.get("kind")
        if kind == "update":
            out["update"][w].append(i)
        if kind == "compute":
            out["compute"][w].append(i)
        if t.get("direction") == "pull" or t.get("role") == "pull":
            out["pull"][w].append(i)
            if t.get("stage") != "latency":
                out["pull_link"][w].append(i)
    return out


def _node_members(tags: list[dict], n: int, sets: dict) -> list[int]:
    """Per-node aggregation (:mod:`sgdnet.variants.ps_aggregate`): each worker's node, from
    the transitions tagged with both; every worker of a node reads what its node pulls (each
    GPU pulls a part and broadcasts it), so its pull sets become the node's; the node's update
    transitions (tagged ``node``, no ``worker``) go to ``sets["node_update"]``."""
    member = [-1] * n
    pulls: dict[int, list[int]] = {}
    links: dict[int, list[int]] = {}
    ups: dict[int, list[int]] = {}
    for i, t in enumerate(tags):
        m, w = t.get("node"), t.get("worker")
        if not isinstance(m, (int, np.integer)):
            continue
        if isinstance(w, (int, np.integer)) and 0 <= w < n:
            member[int(w)] = int(m)
            if t.get("direction") == "pull" or t.get("role") == "pull":
                pulls.setdefault(int(m), []).append(i)
                if t.get("stage") != "latency":
                    links.setdefault(int(m), []).append(i)
        elif t.get("kind") == "update":
            ups.setdefault(int(m), []).append(i)
    if min(member) < 0:
        raise VariantError(f"per-node net: worker {member.index(-1)} has no transition tagged "
                           "with its node; cannot read its schedule")
    sets["node_update"] = ups
    for w in range(n):
        sets["pull"][w] = pulls.get(member[w], [])
        sets["pull_link"][w] = links.get(member[w], [])
    return member


def _batches(prediction: Any) -> list[int]:
    n = prediction.cluster.workers
    bs = prediction.meta.get("batch_sizes")
    return [int(b) for b in bs] if bs else [int(prediction.model.batch_size)] * n


def _reads(f: _Firings, sets: dict, w: int, at: np.ndarray, vsorted: np.ndarray) -> np.ndarray:
    """Versions worker ``w`` read for gradients whose step ended (or launched) at ``at``."""
    pulls = sets["pull"][w]
    if not pulls:  # the shard on the worker's host: the versions at the step's first compute
        first = f.group(sets["compute"][w], "min", "start")
        k = np.searchsorted(first, at, side="right") - 1
        inst = np.where(k >= 0, first[np.maximum(k, 0)] if first.size else 0.0, -np.inf)
        return np.searchsorted(vsorted, inst, side="right").astype(np.int64)
    pend = f.group(pulls, "max", "end")
    psent = f.group(sets["pull_link"][w] or pulls, "max", "start")
    k = np.searchsorted(pend, at, side="right") - 1
    out = np.zeros(at.size, dtype=np.int64)
    ok = k >= 0
    out[ok] = np.searchsorted(vsorted, psent[k[ok]], side="right")
    return out


def _ps(prediction: Any, f: _Firings) -> Schedule:
    res, variant = prediction.result, prediction.variant
    tags = res.transition_tags
    n = prediction.cluster.workers
    sets = _worker_sets(tags, n)
    bs = _batches(prediction)
    aggregation = prediction.options.get("aggregation", "none")
    member = list(range(n))  # the update group (server-side member) of each worker's gradient
    if aggregation == "node" and variant != "backup":
        member = _node_members(tags, n, sets)
    elif aggregation != "none":
        raise VariantError(f"accuracy schedules of {variant!r} with aggregation="
                           f"{aggregation!r} are not read; use aggregation='none'"
                           + ("" if variant == "backup" else " or 'node'"))
    sync = variant in PS_SYNC
    if sync:
        agg = [i for i, t in enumerate(tags) if t.get("kind") == "update" and "worker" not in t]
        vt = f.group(agg, "max")
        vstart = f.group(agg, "min", "start")
        vkey = [(-1, c) for c in range(vt.size)]
    else:
        parts, vkey = [], []
        for w in sorted(set(member)):
            ups = sets["update"][w] if aggregation == "none" else sets["node_update"][w]
            if not ups:
                raise VariantError(f"net of {variant!r} has no kind='update' transition of "
                                   f"{'worker' if aggregation == 'none' else 'node'} {w}; "
                                   "cannot read its schedule")
            g = f.group(ups, "max")
            parts.append(g)
            vkey += [(w, c) for c in range(g.size)]
        vt = np.concatenate(parts) if parts else np.zeros(0)
    order = np.lexsort((np.arange(vt.size), vt))
    rank = np.empty(vt.size, dtype=np.int64)
    rank[order] = np.arange(vt.size)
    vsorted = vt[order]
    gu, gw, gr, gb, gs = [], [], [], [], []
    if variant == "backup":
        size = int(prediction.meta.get("round_size", n))
        arrivals = []  # (time, trace position, worker)
        for w in range(n):
            e = f.group(sets["step"][w], "max")
            arrivals += [(float(x), w) for x in e]
        arrivals.sort(key=lambda a: a[0])
        launch = {w: f.group([i for i, t in enumerate(tags) if t.get("worker") == w and
                              res.transition_names[i].startswith(f"w{w}.launch")], "min")
                  for w in range(n)}
        for w in range(n):
            launch[w] = np.sort(launch[w])
        filled = np.zeros(vt.size, dtype=np.int64)
        count = dict.fromkeys(range(n), 0)
        for t, w in arrivals:
            c = int(np.searchsorted(vstart, t, side="left"))  # the round this arrival closes in
            if c >= vt.size or filled[c] >= size:
                continue
            filled[c] += 1
            la = launch[w]
            k = np.searchsorted(la, t, side="right") - 1
            at = np.array([la[k] if k >= 0 else 0.0])
            gu.append(int(rank[c]))
            gw.append(w)
            gr.append(int(_reads(f, sets, w, at, vsorted)[0]))
            gb.append(bs[w])
            gs.append(count[w])
            count[w] += 1
    else:
        pos = {k: i for i, k in enumerate(vkey)}
        for w in range(n):
            step_end = f.group(sets["step"][w], "max")
            keys = [(member[w] if not sync else -1, c) for c in range(step_end.size)]
            js = [pos.get(k) for k in keys]
            m = next((c for c, j in enumerate(js) if j is None), len(js))
            if m == 0:
                continue
            reads = _reads(f, sets, w, step_end[:m], vsorted)
            gu += [int(rank[j]) for j in js[:m]]
            gw += [w] * m
            gr += reads.tolist()
            gb += [bs[w]] * m
            gs += list(range(m))
    return _updates_schedule(variant, n, vsorted, gu, gw, gr, gb, gs)


def _updates_schedule(variant: str, n: int, times: np.ndarray, gu, gw, gr, gb, gs) -> Schedule:
    gu_a = np.asarray(gu, dtype=np.int64)
    o = np.lexsort((np.asarray(gw, dtype=np.int64), gu_a))
    s = Schedule("updates", variant, n, np.asarray(times, dtype=float), gu_a[o],
                 np.asarray(gw, dtype=np.int64)[o], np.asarray(gr, dtype=np.int64)[o],
                 np.asarray(gb, dtype=np.int64)[o], np.asarray(gs, dtype=np.int64)[o])
    # keep the updates that hold a gradient (an update group of a gradient never traced is
    # cut off at the end of the trace)
    have = np.bincount(s.grad_update, minlength=s.updates) > 0
    U = int(np.argmin(have)) if not have.all() else s.updates
    if np.any(s.grad_read[s.grad_update < U] > s.grad_update[s.grad_update < U]):
        raise SimulationError(f"{variant}: a gradient read a version applied after it; the "
                              "trace does not follow the schedule conventions")
    return s.truncated(U)


def _lockstep(prediction: Any, f: _Firings) -> Schedule:
    res, variant = prediction.result, prediction.variant
    tags, names = res.transition_tags, res.transition_names
    n = prediction.cluster.workers
    sets = _worker_sets(tags, n)
    bs = _batches(prediction)
    ends = [f.group(sets["step"][w], "max") for w in range(n)]
    U = min(e.size for e in ends)
    coll = [i for i, t in enumerate(tags) if "collective" in t and "worker" not in t
            and names[i].endswith(".end")]
    vt = f.group(coll, "max") if coll else np.zeros(0)
    if vt.size < U:  # the latest step completion of the round
        vt = np.max(np.vstack([e[:U] for e in ends]), axis=0) if U else np.zeros(0)
    U = min(U, vt.size)
    lag = int(prediction.options.get("width", 2)) - 1 if variant == "pipe-sgd" else 0
    gu = np.repeat(np.arange(U), n)
    gw = np.tile(np.arange(n), U)
    gr = np.maximum(gu - lag, 0)
    gb = np.asarray(bs, dtype=np.int64)[gw]
    return _updates_schedule(variant, n, vt[:U], gu, gw, gr, gb, gu)


def _local(prediction: Any, f: _Firings) -> Schedule:
    res, variant = prediction.result, prediction.variant
    tags, names = res.transition_tags, res.transition_names
    n = prediction.cluster.workers
    sets = _worker_sets(tags, n)
    bs = _batches(prediction)
    key = "H" if variant == "local-sgd" else "k"
    h = prediction.options.get(key, 4)
    hs = np.broadcast_to(np.asarray(h, dtype=np.int64), (n,)).copy()
    ends = [f.group(sets["step"][w], "max") for w in range(n)]
    if variant == "local-sgd":
        coll = [i for i, t in enumerate(tags) if "collective" in t and "worker" not in t
                and names[i].endswith(".end")]
        rt = f.group(coll, "max") if coll else np.zeros(0)
        if not coll:  # sync="ps": the resume of the last worker
            rt = f.group([i for i, nm in enumerate(names) if nm.endswith(".avg.resume")], "max")
    else:
        rt = f.group([i for i, nm in enumerate(names) if nm.endswith(".merge")
                      and tags[i].get("phase") == "merge"], "max")
    R = min([rt.size] + [e.size // int(hs[w]) for w, e in enumerate(ends)])
    t, w, b = [], [], []
    for i in range(n):
        m = R * int(hs[i])
        t.append(ends[i][:m])
        w.append(np.full(m, i, dtype=np.int64))
        b.append(np.full(m, bs[i], dtype=np.int64))
    tt, ww, bb = np.concatenate(t), np.concatenate(w), np.concatenate(b)
    o = np.lexsort((ww, tt))
    return Schedule("local", variant, n, step_time=tt[o], step_worker=ww[o], step_samples=bb[o],
                    round_steps=hs, round_time=rt[:R],
                    averaging="average" if variant == "local-sgd" else "cocod")


def schedule_of(prediction: Any, rep: int = 0) -> Schedule:
    """The update schedule of replication ``rep`` of ``prediction``.

    Parameters
    ----------
    prediction : Prediction
        Made with ``trace=True`` and ``warmup=0`` (so the trace starts with training), with a
        trace covering the steps to read (``simulate(trace_limit=...)``).
    rep : int
        The replication.

    Raises
    ------
    SimulationError
        No trace.
    VariantError
        A variant (or option) whose schedule is not defined.
    """
    res = prediction.result
    if getattr(res, "trace", None) is None:
        raise SimulationError("schedule_of needs the firing trace; predict with trace=True "
                              "(sgdnet.accuracy.time_to_accuracy does)")
    variant = prediction.variant
    if variant not in VARIANTS:
        raise VariantError(f"no update schedule for variant {variant!r}; known: "
                           f"{sorted(VARIANTS)}")
    f = _Firings(res, res._rep(rep))
    if variant in LOCKSTEP:
        return _lockstep(prediction, f)
    if variant in LOCAL:
        return _local(prediction, f)
    return _ps(prediction, f)


def schedules(prediction: Any) -> list[Schedule]:
    """:func:`schedule_of` every replication."""
    return [schedule_of(prediction, r) for r in range(prediction.replications)]
