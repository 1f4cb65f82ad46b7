"""``simulate()``: the public validator in front of the parallel driver and the Numba kernel."""

from __future__ import annotations

import math
import sys

import numpy as np

from ..errors import DeadlockError, SimulationError
from ..net.builder import Net
from ..net.compiled import CompiledNet, compile_net
from ..results import RawReplication, Result
from .driver import derive_seeds, run

__all__ = ["simulate", "default_max_events"]

_MAX_SEED = 2**64


def _int_arg(name: str, v, lo: int, hint: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise SimulationError(f"{name}={v!r} must be an integer >= {lo}{hint}")
    return int(v)


def _bool_arg(name: str, v) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise SimulationError(f"{name}={v!r} must be True or False")
    return bool(v)


def default_max_events(steps: int, warmup: int, n_transitions: int) -> int:
    """The default completion budget per replication: ``min(1000 (warmup+steps) T, 10**9)``."""
    return int(min(1000 * (warmup + steps) * n_transitions, 10**9))


def _zeno_limit(n_transitions: int) -> int:
    return max(10**6, 1000 * n_transitions)


def simulate(
    net: Net | CompiledNet,
    steps: int = 1000,
    warmup: int = 100,
    replications: int = 8,
    seed=None,
    trace: bool = False,
    trace_limit: int = 200_000,
    samples: bool = True,
    max_events: int | None = None,
    parallel: bool = True,
    *,
    seeds=None,
    progress: bool = False,
) -> Result:
    """Simulate a net with the Numba Monte Carlo engine.

    Parameters
    ----------
    net : Net or CompiledNet
        The net (validated and compiled here; compiling is cached by structure).
    steps : int
        Step completions (of transitions tagged ``step=True``) counted per replication, >= 1.
    warmup : int
        Step completions discarded first, >= 0.
    replications : int
        Independent replications, >= 1 (ignored when ``seeds`` is given).
    seed : None, int or numpy.random.Generator
        Root of the per-replication seeds (:class:`numpy.random.SeedSequence`, one spawned child
        per replication); the seeds used are kept in ``result.seeds``.
    trace : bool
        Record the first ``trace_limit`` completed firings ``(transition, start, end)`` of each
        replication, from time 0.
    trace_limit : int
        Bound of the trace per replication, >= 0.
    samples : bool
        Keep every counted step completion time (``result.step_times``); with ``False`` only
        counters and sums are kept, so memory does not grow with ``steps``.
    max_events : int, optional
        Completion budget per replication (default :func:`default_max_events`).
    parallel : bool
        Run replications on the engine's threads (one per CPU); ``False``: one after the other.
    seeds : sequence of int, optional
        Explicit per-replication seeds, e.g. ``[result.seeds[i]]`` to replay replication ``i``.
    progress : bool
        Show a progress bar (tqdm, on stderr, removed at the end) of the step completions of all
        replications, for runs expected to last more than ~20 ms. Results do not depend on it.

    Returns
    -------
    Result

    Raises
    ------
    NetError
        The net is structurally invalid.
    DeadlockError
        A replication reached a marking where nothing runs and nothing can start.
    SimulationError
        Bad arguments, no step transition, the event budget was exhausted, or time stopped
        advancing (a cycle of zero-duration transitions).

    Examples
    --------
    >>> from sgdnet import Net, Exponential, simulate
    >>> net = Net("loop")
    >>> a = net.place("a", tokens=1); b = net.place("b")
    >>> _ = net.transition("work", Exponential("10ms"), inputs={a: 1}, outputs={b: 1})
    >>> _ = net.transition("done", 0.0, inputs={b: 1}, outputs={a: 1}, tags={"step": True})
    >>> res = simulate(net, steps=100, warmup=10, replications=2, seed=1)
    >>> res.replications
    2
    """
    if not isinstance(net, (Net, CompiledNet)):
        raise SimulationError(f"simulate needs a sgdnet.Net or CompiledNet, got {type(net).__name__}")
    steps = _int_arg("steps", steps, 1)
    warmup = _int_arg("warmup", warmup, 0)
    trace = _bool_arg("trace", trace)
    trace_limit = _int_arg("trace_limit", trace_limit, 0)
    samples = _bool_arg("samples", samples)
    parallel = _bool_arg("parallel", parallel)
    progress = _bool_arg("progress", progress)
    if seeds is not None:
        if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
            raise SimulationError(f"seeds={seeds!r} must be a list of integers, e.g. seeds=[result.seeds[0]]")
        seeds = list(seeds)
        if not seeds:
            raise SimulationError("seeds=[] is empty; give at least one seed or use seed=")
        for s in seeds:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= int(s) < _MAX_SEED:
                raise SimulationError(f"seed {s!r} in seeds must be an integer in [0, 2**64)")
        seeds = [int(s) for s in seeds]
    else:
        replications = _int_arg("replications", replications, 1)
        if seed is not None and not isinstance(seed, np.random.Generator):
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise SimulationError(
                    f"seed={seed!r} must be None, a non-negative integer or a numpy.random.Generator")
        seeds = derive_seeds(seed, replications)
    cn = compile_net(net)  # validates (NetError) unless already compiled
    if not cn.step_transitions:
        raise SimulationError(
            f"net {cn.name!r} has no step transition; tag the transition that ends a step with "
            "tags={'step': True}")
    if cn.no_input_inf:
        raise SimulationError(
            f"transition {cn.no_input_inf[0]!r} has no input places and servers=inf, so it would start "
            "infinitely many firings at once; give it an input place or a finite servers count")
    if max_events is None:
        max_events = default_max_events(steps, warmup, cn.n_transitions)
    max_events = _int_arg("max_events", max_events, 1)

    from . import kernel as K  # numba is imported on first use only

    bar = _ProgressBar(cn.name, len(seeds) * (warmup + steps)) if progress else None
    try:
        out = run(cn, seeds, steps=steps, warmup=warmup, max_events=max_events,
                  zeno_limit=min(_zeno_limit(cn.n_transitions), max_events), samples=samples,
                  trace_limit=trace_limit if trace else 0, parallel=parallel, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    _raise_on_failure(cn, out, max_events, steps, warmup)
    raws = []
    for k in range(len(seeds)):
        nrec = int(out.i[k, K.OI_NREC]) if samples else 0
        ntr = int(out.i[k, K.OI_NTRACE])
        ngl = min(int(out.i[k, K.OI_NGLOG]), out.glog.shape[1])
        if samples:
            glog = out.glog[k, :ngl].copy()
        else:  # the multiset of decisions, from the histograms
            g, r = np.nonzero(out.ghist[k])
            cnt = out.ghist[k][g, r]
            glog = np.stack([np.repeat(g, cnt), np.repeat(r, cnt)], axis=1) if cnt.size else np.zeros((0, 2), np.int64)
        raws.append(RawReplication(
            t0=float(out.f[k, K.OF_T0]), t1=float(out.f[k, K.OF_T1]),
            step_times=out.step_t[k, :nrec].copy(), step_trans=out.step_tr[k, :nrec].copy(),
            firings=out.firings[k].copy(), busy=out.busy[k].copy(), wait_sum=out.wait_sum[k].copy(),
            wait_n=out.wait_n[k].copy(), trace_trans=out.tr_t[k, :ntr].copy(),
            trace_start=out.tr_s[k, :ntr].copy(), trace_end=out.tr_e[k, :ntr].copy(),
            gate_log=glog, events=int(out.i[k, K.OI_EVENTS]),
        ))
    return Result(cn, raws, seeds, steps=steps, warmup=warmup, trace=trace, samples=samples)


def stuck_transitions(cn: CompiledNet, marking: np.ndarray, gcount: np.ndarray, greleased: np.ndarray) -> list[str]:
    """Transitions with a partially marked input set, or enough tokens but inhibited or gated."""
    out = []
    gmin = [int(gcount[cn.g_ptr[g]:cn.g_ptr[g + 1]].min()) if cn.g_ptr[g + 1] > cn.g_ptr[g] else 0
            for g in range(len(cn.gate_names))]
    for t in range(cn.n_transitions):
        a, b = cn.in_ptr[t], cn.in_ptr[t + 1]
        places, w = cn.in_place[a:b], cn.in_w[a:b]
        td = int((marking[places] // w).min()) if b > a else math.inf
        if td == 0:
            if np.any(marking[places] > 0):
                out.append(cn.transition_names[t])
            continue
        inhibited = any(marking[cn.inh_place[k]] >= cn.inh_thr[k] for k in range(cn.inh_ptr[t], cn.inh_ptr[t + 1]))
        gated = False
        gm = int(cn.guard[t])
        if gm >= 0:
            g = int(cn.mem_gate[gm])
            lead = int(gcount[gm]) - gmin[g]
            if cn.g_kind[g] == 0:
                gated = lead > cn.g_s[g]
            else:
                gated = not greleased[gm] and lead > cn.g_slow[g]
        if inhibited or gated:
            out.append(cn.transition_names[t])
    return out


class _ProgressBar:
    """A tqdm bar of step completions, opened on the first report (runs too short to report
    never show one)."""

    def __init__(self, name: str, total: int):
        self.name, self.total, self.bar = name, total, None

    def __call__(self, done: int) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc=f"simulate {self.name}", unit="step", leave=False,
                            file=sys.stderr, dynamic_ncols=True)
        self.bar.n = min(done, self.total)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _deadlock_hint(cn: CompiledNet, nonzero: dict, stuck: list) -> str:
    """What to fix, for the deadlock report: the empty cases name their own cause."""
    if stuck:
        return "Check the initial tokens of the cycles through these transitions."
    if not nonzero:
        return ("No place holds a token, so no transition can ever fire: give the places that start "
                "the cycle their initial tokens, e.g. net.place('ready', tokens=1) per worker.")
    consumed = {cn.place_names[p] for p in cn.in_place} | {cn.place_names[p] for p in cn.inh_place}
    sinks = sorted(p for p in nonzero if p not in consumed)
    if sinks:
        return (f"The tokens sit in places no transition takes from ({sinks[:10]}): "
                "an output arc probably goes to the wrong place, or a consumer is missing.")
    return "Check the initial tokens of the cycles through the transitions reading the marked places."


def _raise_on_failure(cn: CompiledNet, out, max_events: int, steps: int, warmup: int) -> None:
    from . import kernel as K

    for k in range(len(out.seeds)):
        st = int(out.i[k, K.OI_STATUS])
        if st == K.ST_OK:
            continue
        now = float(out.f[k, K.OF_NOW])
        nsteps = int(out.i[k, K.OI_NSTEPS])
        where = (f"net {cn.name!r}, replication {k} (seed {out.seeds[k]}), t={now:.6g}s, after {nsteps} "
                 f"of {warmup + steps} step completions")
        if st == K.ST_DEADLOCK:
            marking = {p: int(v) for p, v in zip(cn.place_names, out.marking[k])}
            stuck = stuck_transitions(cn, out.marking[k], out.gcount[k], out.greleased[k])
            nonzero = {p: v for p, v in marking.items() if v}
            raise DeadlockError(
                f"{where}: deadlock, nothing is running and nothing can start. Marked places: {nonzero}; "
                f"stuck transitions: {stuck[:30]}{' ...' if len(stuck) > 30 else ''}. "
                + _deadlock_hint(cn, nonzero, stuck),
                marking=marking, stuck=stuck, time=now, replication=k)
        if st == K.ST_BUDGET:
            raise SimulationError(
                f"{where}: event budget max_events={max_events} exhausted; the net may loop without "
                "completing steps (check the step=True tags), or raise max_events")
        zero = [n for n, c, p in zip(cn.transition_names, cn.d_code, cn.d_par) if c == 0 and p[0] == 0.0]
        raise SimulationError(
            f"{where}: time stopped advancing ({int(out.i[k, K.OI_EVENTS])} completions, more than "
            f"{_zeno_limit(cn.n_transitions)} at one instant); a cycle of zero-duration transitions "
            f"fires forever (zero-duration transitions: {zero[:20]}); give one of them a duration")
