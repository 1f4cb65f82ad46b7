"""``simulate()``: the public validator in front of the parallel driver and the Numba kernel."""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from .._check import bool_arg, int_arg, seed_arg, seeds_arg
from ..errors import SimulationError
from ..limits import check_limit
from ..net.builder import Net
from ..net.compiled import DISC_FLOW, CompiledNet, compile_net
from ..results import Result
from .abi import unpack
from .diagnose import check_run_size, raise_on_failure, zeno_limit
from .driver import derive_seeds, run

ENGINES = ("auto", "generic", "fast")  # simulate(engine=...); see sgdnet.engine.fastpath

__all__ = ["simulate", "default_max_events", "with_steps", "ensure_kernel", "period_check",
           "check_firing_times", "check_run_work"]


def default_max_events(steps: int, warmup: int, n_transitions: int) -> int:
    """The default completion budget per replication: ``min(1000 (warmup+steps) T, 10**9)``."""
    return int(min(1000 * (warmup + steps) * n_transitions, 10**9))


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
    histograms: bool = False,
    step=None,
    engine: str = "auto",
    periodic: bool = True,
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
    histograms : bool
        Keep a log-spaced histogram of the waits and of the sojourns at every resource (1%
        resolution, :data:`sgdnet.results.HIST_BINS` counters per resource and replication, not
        growing with ``steps``), for :meth:`Result.wait_quantile` and
        :meth:`Result.sojourn_quantile`. Means (:meth:`Result.mean_wait`,
        :meth:`Result.mean_sojourn`) and time-average markings (:meth:`Result.mean_tokens`) are
        always kept.
    step : str or sequence of str, optional
        Names of the transitions whose completions count as steps, for a net without step tags
        (e.g. one read by :func:`sgdnet.net.from_pnml` from another tool); they replace the
        net's own ``step`` tags for this run (the net itself is not changed).
    engine : {"auto", "generic", "fast"}
        ``"auto"``: a fast path when the net is in its class (:mod:`sgdnet.engine.fastpath`),
        else the event kernel; ``"generic"``: always the event kernel; ``"fast"``: a fast path
        or a SimulationError.
    periodic : bool
        For a net without randomness, modulators or trace on the event kernel: look for a
        periodic regime (the state at a checkpoint equal to an earlier one, every time shifted)
        and skip the periods it repeats instead of playing them, in the warm-up and after it
        (:mod:`sgdnet.engine.periodic`; the results agree with a played run to rounding, ~1e-12
        relative). ``result.periodic`` says whether, where and how much was skipped. ``False``:
        play every event.

    Returns
    -------
    Result
        When the net has no randomness (``CompiledNet.deterministic``: every duration and
        modulator multiplier is one fixed value), every seed gives the same trajectory, so it is
        simulated once and shared by all replications; ``result.deterministic`` is then True.

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
    if step is not None:
        net = with_steps(net, step)
    histograms = bool_arg("histograms", histograms)
    steps = int_arg("steps", steps, 1)
    warmup = int_arg("warmup", warmup, 0)
    trace = bool_arg("trace", trace)
    trace_limit = int_arg("trace_limit", trace_limit, 0)
    samples = bool_arg("samples", samples)
    parallel = bool_arg("parallel", parallel)
    progress = bool_arg("progress", progress)
    periodic = bool_arg("periodic", periodic)
    if seeds is not None:
        seeds = seeds_arg(seeds)
    else:
        replications = int_arg("replications", replications, 1)
        check_limit("replications", replications, "max_replications")
        seeds = derive_seeds(seed_arg(seed), replications)
    check_run_size(steps, warmup, len(seeds), samples, trace_limit if trace else 0)
    cn = compile_net(net)  # validates (NetError) unless already compiled
    check_firing_times(cn)  # 1e300 s or '1e-300bps': refused, not a run that never ends
    if not cn.step_transitions:
        raise SimulationError(
            f"net {cn.name!r} has no step transition; tag the transition that ends a step with "
            "tags={'step': True}")
    if cn.no_input_inf:
        raise SimulationError(
            f"transition {cn.no_input_inf[0]!r} has no input places and servers=inf, so it would start "
            "infinitely many firings at once; give it an input place or a finite servers count")
    if histograms:
        from ..limits import limit
        from ..results import HIST_BINS

        need = 16 * HIST_BINS * cn.n_resources * len(seeds)
        if need > limit("max_output_bytes"):
            raise SimulationError(
                f"histograms=True needs {need / 2**30:.3g} GiB ({cn.n_resources} resources x "
                f"{len(seeds)} replications x {HIST_BINS} bins x 2), beyond the limit "
                f"{limit('max_output_bytes') / 2**30:.3g} GiB (max_output_bytes); use fewer "
                "replications or raise the limit with SGDNET_MAX_OUTPUT_BYTES=N")
    chosen = max_events is not None  # a caller's own budget: it knows how long the run is
    if max_events is None:
        max_events = default_max_events(steps, warmup, cn.n_transitions)
    max_events = int_arg("max_events", max_events, 1)
    if warmup + steps > max_events:  # every step is a completion: the budget would run out
        raise SimulationError(
            f"warmup + steps = {warmup + steps:,} step completions cannot fit in the event budget "
            f"of {max_events:,} completions per replication (max_events; each step is at least "
            "one completion), so the run would spend the whole budget and fail; lower steps or "
            "warmup (predict and the CLI count them per worker), or pass a larger max_events")
    if engine not in ENGINES:
        raise SimulationError(f"engine={engine!r} is unknown; use one of {list(ENGINES)}")
    # a net without randomness plays the same trajectory under every seed: run it once and let
    # every requested replication share that record (the Result is the one R runs would give)
    played = seeds[:1] if cn.deterministic else seeds
    if not chosen:
        check_run_work(cn, steps + warmup, len(played))
    bar = _ProgressBar(cn.name, len(played) * (warmup + steps)) if progress else None
    try:
        from .jitcache import call_healing

        if engine != "generic":
            # a damage no check foresaw (numba raising while it loads its cache): files deleted,
            # one warning, retried (sgdnet.engine.jitcache.heal)
            res = call_healing(_try_fast, cn, seeds, engine, steps=steps, warmup=warmup,
                               samples=samples, max_events=max_events, trace=trace,
                               parallel=parallel, histograms=histograms, progress=bar)
            if res is not None:
                return res

        from . import kernel
        from .jitcache import check_cache, preload

        check_cache()  # once per process: a damaged cache file is deleted (one warning), not fatal
        preload(kernel.run_replication)  # a cache hit without numba's registry refresh (~0.3 s)
        out = call_healing(run, cn, played, steps=steps, warmup=warmup, max_events=max_events,
                           zeno_limit=min(zeno_limit(cn.n_transitions), max_events),
                           samples=samples, trace_limit=trace_limit if trace else 0,
                           parallel=parallel, progress=bar, histograms=histograms,
                           period=period_check(cn, periodic and not trace))
    finally:
        if bar is not None:
            bar.close()
    raise_on_failure(cn, out, max_events, steps, warmup)
    raws = [unpack(out, k, samples) for k in range(len(played))]
    if len(raws) < len(seeds):
        raws = raws * len(seeds)
    return Result(cn, raws, seeds, steps=steps, warmup=warmup, trace=trace, samples=samples,
                  deterministic=cn.deterministic)


def _law_means(code: np.ndarray, par: np.ndarray) -> np.ndarray:
    """The mean of each law row (``d_code``, ``d_par`` columns 0..2 as :mod:`sgdnet.dists`
    flattens them); Empirical rows are 0 (their pool is checked on its own), Stragglers are
    left to the caller."""
    from .. import dists as D

    p0, p1 = par[:, 0], par[:, 1]
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.select(
            [np.isin(code, (D.CODE_DET, D.CODE_EXP, D.CODE_NORM)), code == D.CODE_UNIF,
             code == D.CODE_LOGN, code == D.CODE_GAMMA, code == D.CODE_SHEXP],
            [p0, 0.5 * (p0 + p1), np.exp(np.minimum(p0 + 0.5 * p1 * p1, 800.0)),
             np.where(p0 == 0, p1, p0 * p1), p0 + p1], 0.0)
    return out


def check_run_work(cn: CompiledNet, step_completions: int, runs: int) -> None:
    """Refuse a run estimated to play more than ``max_run_events`` completions (every
    transition once per step of a step transition: ``T x step_completions / S x runs``), before
    it starts, naming the estimate and what to lower (issue #43: ``--workers 65536`` gave no
    answer for hours)."""
    from ..limits import limit

    S = max(1, len(cn.step_transitions))
    est = len(cn.transition_names) * -(-step_completions // S) * runs
    lim = limit("max_run_events")
    if est > lim:
        raise SimulationError(
            f"net {cn.name!r}: this run would play about {est:.3g} completions "
            f"({len(cn.transition_names):,} transitions x {-(-step_completions // S):,} steps x "
            f"{runs} replications), beyond the limit {lim:.3g} (max_run_events: hours of "
            "simulation); use fewer workers, steps or replications, granularity='coarse', or "
            "raise the limit with SGDNET_MAX_RUN_EVENTS=N (or pass max_events=N) if it is "
            "deliberate")


def check_firing_times(cn: CompiledNet) -> None:
    """Refuse a net with a firing whose mean time is not finite or beyond the ``max_firing_s``
    limit (a transfer's: its bytes over its slowest link), before anything runs: a clock at
    1e300 s loses every short duration to rounding and the run would never end (issue #43).

    Raises
    ------
    SimulationError
        Naming the transition, its mean time, the limit and how to raise it.
    """
    from .. import dists as D
    from ..limits import limit

    nT = len(cn.transition_names)
    if not nT:
        return
    code, par = cn.d_code[:nT], cn.d_par[:nT]
    mean = _law_means(code, par)
    strag = code == D.CODE_STRAG
    if strag.any():  # factor x the base law's mean (its code and parameters in columns 2..5)
        base = _law_means(par[strag, 2].astype(np.int64), par[strag, 3:6])
        mean[strag] = np.maximum(1.0, par[strag, 1]) * base
    ptr, idx = cn.psres_ptr, cn.psres_idx
    if idx.size and (cn.r_disc[idx] == DISC_FLOW).any():  # transfers: bytes / slowest link
        bw = np.where(cn.r_disc[idx] == DISC_FLOW, cn.r_bw[idx], np.inf)
        rows = np.flatnonzero(ptr[1:] > ptr[:-1])
        slow = np.minimum.reduceat(bw, ptr[rows])
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            t = np.where(np.isfinite(slow), mean[rows] / slow, mean[rows])
        mean[rows] = np.where(np.isfinite(slow), t, mean[rows])
    lim = limit("max_firing_s")
    bad = np.flatnonzero(~(np.abs(mean) <= lim))  # nan and inf too
    pool_bad = cn.d_pool.size and not float(np.max(cn.d_pool)) <= lim
    if not bad.size and not pool_bad:
        return
    if bad.size:
        i = int(bad[0])
        what = (f"transition {cn.transition_names[i]!r} takes {mean[i]:.3g} s per firing on "
                "average" + (" (its bytes over its slowest link)"
                             if cn.psres_ptr[i + 1] > cn.psres_ptr[i] else ""))
    else:
        what = f"an Empirical duration sample is {float(np.max(cn.d_pool)):.3g} s"
    raise SimulationError(
        f"net {cn.name!r}: {what}, beyond the limit {lim:,} s (max_firing_s): a typo in a "
        "duration, a size or a bandwidth (e.g. '1e-300bps')? The simulated clock would stop "
        "advancing; if it is deliberate, raise the limit with SGDNET_MAX_FIRING_S=N or "
        "sgdnet.limits.LIMITS['max_firing_s'] = N")


def period_check(cn: CompiledNet, allowed: bool = True) -> int:
    """The kernel's ``period`` argument: the spacing, in step completions, of the checkpoints at
    which it looks for a periodic regime (one per step transition), or 0 (not looked for: the
    net has randomness or modulators, its canonical states would take more than
    :data:`sgdnet.engine.periodic.MAX_STATE_BYTES`, or ``allowed`` is False) or has token
    buckets or join stages (their tokens, the connections' lags are not in the canonical
    state)."""
    from .periodic import MAX_STATE_BYTES, state_bytes

    if (not allowed or not cn.deterministic or cn.mod_kind.size or cn.r_tb[:, 0].any()
            or (cn.jn_link >= 0).any()):
        return 0
    if state_bytes(cn) > MAX_STATE_BYTES:  # the canonical states would cost too much memory
        return 0
    return max(1, len(cn.step_transitions))


def ensure_kernel() -> bool:
    """Have the generic kernel's machine code in numba's cache: compile it now (a two-step run of
    a one-transition net) if the cache has no usable copy, else do nothing (it is loaded at the
    first :func:`simulate` that needs it).

    For a parent about to start worker processes (a local study): each would otherwise compile
    the kernel for itself at its first row, ~30 s of CPU per process, and with more processes
    than cores that many times the wall time.

    Returns
    -------
    bool
        True when it compiled.
    """
    from .jitcache import check_cache

    if not check_cache():
        return False
    from ..dists import Deterministic

    net = Net("kernel-warm-up")
    net.place("p", 1)
    net.transition("t", Deterministic(1.0), inputs=["p"], outputs=["p"], tags={"step": True})
    from .kernel import specialise

    with specialise.generic_only():  # the generic kernel, which serves every net
        simulate(net, steps=2, warmup=0, replications=1, seed=0, parallel=False, engine="generic")
    return True


def with_steps(net: Net | CompiledNet, step) -> Net:
    """A copy of ``net`` whose step transitions are exactly the transitions named by ``step``
    (a name or a sequence of names): ``simulate(..., step=...)`` for nets without step tags.

    Raises
    ------
    SimulationError
        ``net`` is compiled (pass the Net), ``step`` is empty or not names, or names a
        transition the net does not have.
    """
    if isinstance(net, CompiledNet):
        raise SimulationError("step= needs the Net, not a CompiledNet (its step tags are compiled "
                              "in); pass the Net, or tag the step transitions with tags={'step': True}")
    names = [step] if isinstance(step, str) else step
    try:
        names = list(names)
    except TypeError:
        names = None
    if not names or not all(isinstance(n, str) for n in names):
        raise SimulationError(f"step={step!r} must be a transition name or a non-empty list of "
                              "them, e.g. step='done'")
    missing = [n for n in names if n not in net.transitions]
    if missing:
        known = list(net.transitions)
        raise SimulationError(f"step={missing[0]!r} is not a transition of net {net.name!r}; known: "
                              f"{known[:20]}" + (" ..." if len(known) > 20 else ""))
    wanted = set(names)
    out = net.copy()
    for t in out.transitions.values():
        if t.is_step != (t.name in wanted):
            t.tags["step"] = t.name in wanted
    return out


def _try_fast(cn: CompiledNet, seeds: list, engine: str, *, steps: int, warmup: int, samples: bool,
              max_events: int, trace: bool, parallel: bool, histograms: bool = False,
              progress: Callable[[int], None] | None = None) -> Result | None:
    """The fast path's Result, or None when the generic engine must run (``engine="fast"``:
    a SimulationError instead). Only the compiled functions of the path that runs are checked
    and loaded (a net outside both classes touches neither path's numba cache)."""
    from .fastpath import MAX_HISTORY_BYTES, fast_path_problems, history_fits

    why = (["a trace was asked for (the fast path records none)"] if trace
           else ["histograms were asked for (the fast path records none)"] if histograms
           else fast_path_problems(cn))
    long_run = not why and not history_fits(cn, steps, warmup)
    if long_run:  # the FIFO path's history is bounded: it may take the run
        why = [f"the run needs more history than the event-graph path keeps "
               f"({MAX_HISTORY_BYTES / 2**20:g} MB)"]
    raws = None
    kind = "fast"
    played = seeds[:1] if cn.deterministic else seeds
    if not why:
        from . import eg_record, fastpath, rng

        _ready(fastpath, (fastpath, eg_record, rng))
        raws = fastpath.run_fast(cn, played, steps=steps, warmup=warmup, samples=samples,
                                 max_events=max_events, parallel=parallel, progress=progress)
        if raws is None:
            why = ["the run needs more history memory or events than the fast path allows"]
    elif not trace and not histograms:  # the sort-then-queue recursion for shared FIFO links
        from . import eg_record, fastpath_fifo, fifo_record, rng

        why_fifo = fastpath_fifo.fifo_path_problems(cn)
        if not why_fifo:
            _ready(fastpath_fifo, (fastpath_fifo, fifo_record, eg_record, rng))
            raws = fastpath_fifo.run_fifo(cn, played, steps=steps, warmup=warmup, samples=samples,
                                          max_events=max_events, parallel=parallel,
                                          progress=progress)
            kind = "fast-fifo"
            if raws is None:
                why = ["the run needs more history memory or events than the fast path allows"]
        elif long_run:
            why = [f"{why[0]}, and the net is not in the FIFO-round class ({why_fifo[0]})"]
        else:
            why = [f"not an event graph ({why[0]}) and not in the FIFO-round class ({why_fifo[0]})"]
    if raws is None:
        if engine == "fast":
            raise SimulationError(f"engine='fast' cannot run net {cn.name!r}: " + "; ".join(why)
                                  + "; use engine='auto' or 'generic'")
        return None
    if len(raws) < len(seeds):
        raws = raws * len(seeds)
    res = Result(cn, raws, seeds, steps=steps, warmup=warmup, trace=False, samples=samples,
                 deterministic=cn.deterministic)
    res.engine = kind
    return res


def _ready(path, modules) -> None:
    """Before a fast path's first run in this process: its numba caches (and the kernel's and the
    random streams') checked for damage (deleted with one warning, rebuilt), then the compiled
    functions it calls from Python loaded (:func:`jitcache.preload`)."""
    from .jitcache import check_cache, preload

    if not path.CACHE_CHECKED:
        check_cache()
        for m in modules:
            check_cache(m)
        path.CACHE_CHECKED = True
    for d in path.PRELOAD:
        preload(d)


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
