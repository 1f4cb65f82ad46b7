"""A worker's compute: the fine per-layer chain, the coarse phase, local-step loops, stragglers.

Compute
    :func:`compute_chain` lays out one worker's fine-grained step: forward of layer ``0..L-1``
    then backward of ``L-1..0``, each a transition holding the worker's GPU resource, each
    waiting for the previous one (a token in ``w{i}.start`` starts the step; backward of layer 0
    puts it back and is the worker's ``step=True`` transition). Worker ``i``'s durations are the
    profile times divided by ``cluster.speed(i)``. :func:`compute_phase` is the coarse
    equivalent: one ``w{i}.compute`` transition of the total forward + backward time.

Input pipeline
    With a topology whose ``input_s_per_sample > 0`` both also take each step's batch from the
    worker's input pipeline on the node's CPUs and give its credit back at the step's end
    (:func:`.input_pipeline.feed`); otherwise nothing changes.

Stragglers
    If ``cluster.straggler`` is not ``None``, :func:`apply_straggler` calls
    ``cluster.straggler.modulator(net, worker, step_start_transition_name)``; a returned
    modulator name is set on every compute transition of that worker (``None``: no modulator).

Proportional sampling (option ``balance``)
    :func:`batch_sizes` gives worker ``i`` the batch ``B n s_i / sum(s)`` (``balance="batch"``;
    rounded by largest remainder so the global batch stays ``n B``, at least 1 each) and
    :func:`worker_profiles` the profile each worker computes with (compute time linear in the
    batch, :meth:`ModelProfile.scaled`; gradient bytes unchanged), so every worker's step
    takes about ``T_c n / sum(s)`` and a fast worker does more samples per step. The batches
    go to ``net.meta["batch_sizes"]``, by which :func:`sgdnet.predict` counts samples.

Local-step loops
    :func:`local_loop` makes worker ``i`` run ``k`` SGD steps, then stop: a ``w{i}.budget``
    place holding ``k`` tokens is an extra input of the step's first compute operation, and every
    step's last compute operation puts a token in ``w{i}.acc``. A synchronisation transition
    takes ``k`` tokens of ``acc`` and, when done, gives ``k`` budget tokens back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import VariantError
from ..net import Net
from ..net.elements import new_place, new_transition
from ..workload import Cluster, ModelProfile
from .durations import duration
from .fabric import Fabric
from .input_pipeline import feed
from .layers import compute_cv

__all__ = ["Chain", "compute_chain", "compute_phase", "apply_straggler", "LocalLoop",
           "first_compute", "local_loop", "batch_sizes", "worker_profiles"]


def batch_sizes(model: ModelProfile, cluster: Cluster, balance: str) -> list[int]:
    """Per-worker batch sizes: the profile's (``balance="none"``), or proportional to speed
    (``"batch"``): ``B n s_i / sum(s)`` rounded by largest remainder (the global batch stays
    ``n B``; ties to the lower worker index), at least 1 each.

    Raises
    ------
    VariantError
        An unknown ``balance``.
    """
    n, B = cluster.workers, model.batch_size
    if balance == "none":
        return [B] * n
    if balance != "batch":
        raise VariantError(f"balance={balance!r}: use 'none' or 'batch'")
    sp = [cluster.speed(i) for i in range(n)]
    tot = math.fsum(sp)
    exact = [B * n * s / tot for s in sp]
    out = [math.floor(x) for x in exact]
    left = n * B - sum(out)
    for i in sorted(range(n), key=lambda i: (-(exact[i] - out[i]), i))[:left]:
        out[i] += 1
    return [max(1, b) for b in out]


def worker_profiles(model: ModelProfile, cluster: Cluster, balance: str
                    ) -> tuple[list[ModelProfile], list[int]]:
    """Each worker's profile and batch for ``balance`` (see :func:`batch_sizes`): ``model``
    itself where the batch is the profile's, else ``model.scaled(batch_size=b)``."""
    bs = batch_sizes(model, cluster, balance)
    cache: dict[int, ModelProfile] = {model.batch_size: model}
    profs = []
    for b in bs:
        if b not in cache:
            cache[b] = model.scaled(batch_size=b)
        profs.append(cache[b])
    return profs, bs


@dataclass
class Chain:
    """One worker's compute transitions: ``start`` place, ``fwd[l]`` / ``bwd[l]`` names."""

    worker: int
    start: str
    fwd: list[str] = field(default_factory=list)
    bwd: list[str] = field(default_factory=list)

    @property
    def step(self) -> str:
        """The worker's ``step=True`` transition (backward of layer 0)."""
        return self.bwd[0]

    @property
    def all(self) -> list[str]:
        """Every compute transition of the chain."""
        return [*self.fwd, *self.bwd[::-1]]


def compute_chain(
    net: Net,
    fabric: Fabric,
    model: ModelProfile,
    cluster: Cluster,
    worker: int,
    *,
    fwd_inputs: Mapping[int, Sequence[str]] | None = None,
    bwd_outputs: Mapping[int, Sequence[str]] | None = None,
) -> Chain:
    """Forward ``0..L-1`` then backward ``L-1..0`` of ``worker`` on its GPU.

    Parameters
    ----------
    fwd_inputs : dict layer -> place names
        Extra inputs of each forward (the layer's parameters; credits for layer 0).
    bwd_outputs : dict layer -> place names
        Extra outputs of each backward (the layer's gradients).

    Returns
    -------
    Chain
        ``start`` holds one token initially; backward of layer 0 refills it and is tagged
        ``step=True``. The straggler hook is applied (see :func:`apply_straggler`).
    """
    i = worker
    fwd_inputs = fwd_inputs or {}
    bwd_outputs = bwd_outputs or {}
    fd = feed(net, model, cluster, i)
    if fd is not None:  # the input pipeline: a batch in for the first forward, a credit back
        fwd_inputs = {**fwd_inputs, 0: [*fwd_inputs.get(0, ()), fd.batch]}
        bwd_outputs = {**bwd_outputs, 0: [*bwd_outputs.get(0, ()), fd.credit]}
    sp = cluster.speed(i)
    gpu = fabric.gpu(i)
    ch = _chain_at_once(net, model, cluster.compute_cv, i, sp, gpu, fwd_inputs, bwd_outputs)
    if ch is None:
        ch = _chain_checked(net, model, cluster.compute_cv, i, sp, gpu, fwd_inputs, bwd_outputs)
    apply_straggler(net, cluster, i, ch.fwd[0], ch.all)
    return ch


def _chain_at_once(net: Net, model: ModelProfile, default_cv: float, i: int, sp: float,
                   gpu: str, fwd_inputs: Mapping[int, Sequence[str]],
                   bwd_outputs: Mapping[int, Sequence[str]]) -> Chain | None:
    """:func:`_chain_checked`'s places and transitions made directly and added with one
    :meth:`Net.insert` (the same elements, in the same order); None, adding nothing, when a
    name is taken."""
    L = model.n_layers
    fwd_d, bwd_d = _layer_durations(model, sp, default_cv)
    start = f"w{i}.start"
    places = [new_place(start, 1, {"worker": i})]
    trans = []
    prev = start
    for l in range(L):
        out = f"w{i}.f{l}.done"
        places.append(new_place(out, 0, {"worker": i}))
        ins = {prev: 1}
        for p in fwd_inputs.get(l, ()):
            if type(p) is not str:  # a node, not a name: the checked way resolves it
                return None
            ins[p] = 1
        trans.append(new_transition(
            f"w{i}.fwd{l}", fwd_d[l], ins, {out: 1}, (gpu,),
            {"worker": i, "kind": "compute", "layer": l, "phase": "fwd", "step": False}))
        prev = out
    for l in range(L - 1, -1, -1):
        if l == 0:
            nxt = start
        else:
            nxt = f"w{i}.b{l}.done"
            places.append(new_place(nxt, 0, {"worker": i}))
        outs = {nxt: 1}
        for p in bwd_outputs.get(l, ()):
            if type(p) is not str:
                return None
            outs[p] = 1
        trans.append(new_transition(
            f"w{i}.bwd{l}", bwd_d[l], {prev: 1}, outs, (gpu,),
            {"worker": i, "kind": "compute", "layer": l, "phase": "bwd", "step": l == 0}))
        prev = nxt
    if not net.insert(places, trans):
        return None
    return Chain(i, start, [t.name for t in trans[:L]], [t.name for t in trans[:L - 1:-1]])


_DURATIONS: dict[tuple, tuple[Any, list, list]] = {}


def _layer_durations(model: ModelProfile, sp: float, default_cv: float) -> tuple[list, list]:
    """Each layer's forward and backward duration at speed ``sp`` (for both chain builders),
    computed once per profile and speed (the workers of a net mostly share both;
    a profile's layers are a frozen sequence, checked by identity)."""
    key = (id(model), sp, default_cv, model.cv)
    got = _DURATIONS.get(key)
    if got is None or got[0] is not model.layers:
        if len(_DURATIONS) > 256:
            _DURATIONS.clear()
        fwd = [duration(la.forward_s / sp, model.layer_cv(l, default_cv))
               for l, la in enumerate(model.layers)]
        bwd = [duration(la.backward_s / sp, model.layer_cv(l, default_cv))
               for l, la in enumerate(model.layers)]
        got = (model.layers, fwd, bwd)
        _DURATIONS[key] = got
    return got[1], got[2]


def _chain_checked(net: Net, model: ModelProfile, default_cv: float, i: int, sp: float,
                   gpu: str, fwd_inputs: Mapping[int, Sequence[str]],
                   bwd_outputs: Mapping[int, Sequence[str]]) -> Chain:
    """The chain of :func:`compute_chain` through the checked builder methods."""
    L = model.n_layers
    fwd_d, bwd_d = _layer_durations(model, sp, default_cv)
    start = net.place(f"w{i}.start", 1, worker=i).name
    ch = Chain(i, start, [None] * L, [None] * L)  # type: ignore[list-item]
    prev = start
    for l in range(L):
        out = net.place(f"w{i}.f{l}.done", worker=i).name
        ins = {prev: 1, **{p: 1 for p in fwd_inputs.get(l, ())}}
        t = net.transition(
            f"w{i}.fwd{l}", fwd_d[l], inputs=ins, outputs={out: 1}, resources=[gpu],
            tags={"worker": i, "kind": "compute", "layer": l, "phase": "fwd", "step": False})
        ch.fwd[l] = t.name
        prev = out
    for l in range(L - 1, -1, -1):
        nxt = start if l == 0 else net.place(f"w{i}.b{l}.done", worker=i).name
        outs = {nxt: 1, **{p: 1 for p in bwd_outputs.get(l, ())}}
        t = net.transition(
            f"w{i}.bwd{l}", bwd_d[l], inputs={prev: 1}, outputs=outs, resources=[gpu],
            tags={"worker": i, "kind": "compute", "layer": l, "phase": "bwd", "step": l == 0})
        ch.bwd[l] = t.name
        prev = nxt
    return ch


def compute_phase(
    net: Net,
    fabric: Fabric,
    model: ModelProfile,
    cluster: Cluster,
    worker: int,
    *,
    inputs: Sequence[str],
    outputs: Sequence[str],
) -> str:
    """Coarse compute phase ``w{i}.compute``: the whole forward + backward on the GPU.

    Its mean is ``model.compute_s / speed(i)`` and its CV :func:`compute_cv` (the CV of the
    fine-grained sum of independent layer times), so coarse and fine nets of the same profile
    have the same compute mean and variance. Tagged ``step=True``.
    """
    i = worker
    fd = feed(net, model, cluster, i)
    if fd is not None:  # the input pipeline (see compute_chain)
        inputs, outputs = [*inputs, fd.batch], [*outputs, fd.credit]
    sp = cluster.speed(i)
    total, cv = _totals(model, cluster.compute_cv)
    t = net.transition(
        f"w{i}.compute", duration(total / sp, cv),
        inputs={p: 1 for p in inputs}, outputs={p: 1 for p in outputs},
        resources=[fabric.gpu(i)], tags={"worker": i, "kind": "compute", "step": True})
    apply_straggler(net, cluster, i, t.name, [t.name])
    return t.name


_TOTALS: dict[tuple[int, float], tuple[Any, float, float]] = {}


def _totals(model: ModelProfile, default_cv: float) -> tuple[float, float]:
    """``model.compute_s`` and :func:`compute_cv`, computed once per profile (every worker of a
    coarse net asks for the same; a profile's layers are a frozen sequence, checked by
    identity)."""
    got = _TOTALS.get((id(model), default_cv))
    if got is None or got[0] is not model.layers:
        if len(_TOTALS) > 64:
            _TOTALS.clear()
        got = (model.layers, model.compute_s, compute_cv(model, default_cv))
        _TOTALS[id(model), default_cv] = got
    return got[1], got[2]


def apply_straggler(net: Net, cluster: Cluster, worker: int, start: str,
                    compute: Iterable[str]) -> str | None:
    """Call the straggler protocol for ``worker`` and set the modulator it returns.

    ``cluster.straggler.modulator(net, worker, start)`` may add a modulator to ``net`` (e.g.
    resampled when ``start``, the worker's step-start transition, fires) and returns its name,
    or ``None`` for no modulator; the name is set on every transition in ``compute``.

    Raises
    ------
    VariantError
        The straggler returned a name that is not a modulator of ``net``.
    """
    st = cluster.straggler
    if st is None:
        return None
    fn = getattr(st, "modulator", None)
    if not callable(fn):
        raise VariantError(
            f"cluster.straggler={st!r} has no modulator(net, worker, start) method; use a "
            "straggler model from sgdnet.workload.stragglers or None"
        )
    name = fn(net, worker, start)
    if name is None:
        return None
    if name not in net.modulators:
        raise VariantError(
            f"cluster.straggler.modulator returned {name!r} for worker {worker}, which is not a "
            f"modulator of the net (known: {sorted(net.modulators)})"
        )
    for t in compute:
        net.transitions[t].modulator = name
    return name


@dataclass
class LocalLoop:
    """One worker's local-step loop: ``budget`` / ``acc`` places, first and step transitions."""

    worker: int
    budget: str
    acc: str
    first: str
    step: str
    compute: list[str]


def first_compute(net: Net, worker: int) -> str:
    """Name of the first compute operation of ``worker``'s step in a net built by
    :func:`compute_chain` (``w{i}.fwd0``) or :func:`compute_phase`
    (``w{i}.compute``)."""
    for name in (f"w{worker}.fwd0", f"w{worker}.compute"):
        if name in net.transitions:
            return name
    raise VariantError(f"net {net.name!r} has no compute chain for worker {worker}")


def local_loop(net: Net, fabric: Fabric, model: ModelProfile, cluster: Cluster, worker: int,
               k: int, *, coarse: bool, budget_tokens: int | None = None) -> LocalLoop:
    """Worker ``worker`` runs up to ``k`` local SGD steps, then waits for budget.

    ``budget_tokens`` (default ``k``) is the initial budget. The straggler hook is applied by
    :func:`compute_chain` / :func:`compute_phase`.
    """
    i = worker
    budget = net.place(f"w{i}.budget", k if budget_tokens is None else budget_tokens,
                       worker=i).name
    acc = net.place(f"w{i}.acc", worker=i).name
    if coarse:
        start = net.place(f"w{i}.start", 1, worker=i).name
        t = compute_phase(net, fabric, model, cluster, i, inputs=[start, budget],
                          outputs=[start, acc])
        return LocalLoop(i, budget, acc, t, t, [t])
    ch = compute_chain(net, fabric, model, cluster, i, fwd_inputs={0: [budget]},
                       bwd_outputs={0: [acc]})
    return LocalLoop(i, budget, acc, ch.fwd[0], ch.step, ch.all)
