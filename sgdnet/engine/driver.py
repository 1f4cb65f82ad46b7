"""Run replications of the kernel: serial, or in parallel with numba ``prange`` (one replication
per iteration; each replication owns its RNG state, seeded from its own integer seed, so results
do not depend on the number of threads)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..net.compiled import CompiledNet
from .kernel import N_OF, N_OI, run_replication

__all__ = ["derive_seeds", "RunOutput", "run", "run_serial_kernel", "run_parallel_kernel"]


def derive_seeds(seed, n: int) -> list[int]:
    """``n`` independent 64-bit integer seeds from ``seed`` (None, int or numpy Generator),
    via :class:`numpy.random.SeedSequence` (one spawned child per replication)."""
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(0, 2**63 - 1))
    ss = np.random.SeedSequence(seed)
    return [int(c.generate_state(1, dtype=np.uint64)[0]) for c in ss.spawn(n)]


@njit(cache=True)
def run_serial_kernel(net, seeds, steps, warmup, max_events, zeno_limit, samples, trace_limit,
                      o_f, o_i, o_step_t, o_step_tr, o_firings, o_busy, o_wsum, o_wn,
                      o_tr_t, o_tr_s, o_tr_e, o_glog, o_ghist, o_mark, o_gcnt, o_grel):
    for i in range(seeds.size):
        run_replication(*net, seeds[i], steps, warmup, max_events, zeno_limit, samples, trace_limit,
                        o_f[i], o_i[i], o_step_t[i], o_step_tr[i], o_firings[i], o_busy[i], o_wsum[i],
                        o_wn[i], o_tr_t[i], o_tr_s[i], o_tr_e[i], o_glog[i], o_ghist[i], o_mark[i],
                        o_gcnt[i], o_grel[i])


@njit(cache=True, parallel=True)
def run_parallel_kernel(net, seeds, steps, warmup, max_events, zeno_limit, samples, trace_limit,
                        o_f, o_i, o_step_t, o_step_tr, o_firings, o_busy, o_wsum, o_wn,
                        o_tr_t, o_tr_s, o_tr_e, o_glog, o_ghist, o_mark, o_gcnt, o_grel):
    for i in prange(seeds.size):
        run_replication(*net, seeds[i], steps, warmup, max_events, zeno_limit, samples, trace_limit,
                        o_f[i], o_i[i], o_step_t[i], o_step_tr[i], o_firings[i], o_busy[i], o_wsum[i],
                        o_wn[i], o_tr_t[i], o_tr_s[i], o_tr_e[i], o_glog[i], o_ghist[i], o_mark[i],
                        o_gcnt[i], o_grel[i])


@dataclass
class RunOutput:
    """The raw output arrays of a batch of replications (first axis: replication)."""

    seeds: list[int]
    f: np.ndarray  # (R, 3) t0, t1, now
    i: np.ndarray  # (R, 6) status, events, nsteps, n_trace, n_glog, n_rec
    step_t: np.ndarray
    step_tr: np.ndarray
    firings: np.ndarray
    busy: np.ndarray
    wait_sum: np.ndarray
    wait_n: np.ndarray
    tr_t: np.ndarray
    tr_s: np.ndarray
    tr_e: np.ndarray
    glog: np.ndarray
    ghist: np.ndarray
    marking: np.ndarray
    gcount: np.ndarray
    greleased: np.ndarray


def gate_log_capacity(cn: CompiledNet, steps: int, warmup: int, samples: bool) -> int:
    """Room for logged DSSP controller decisions per replication (histograms are always kept)."""
    if not samples or not any(k == "dynamic_lag" for k in cn.gate_kinds):
        return 0
    return 2 * (steps + warmup) + 1024


def run(cn: CompiledNet, seeds: list[int], *, steps: int, warmup: int, max_events: int,
        zeno_limit: int, samples: bool, trace_limit: int, parallel: bool) -> RunOutput:
    """Run one kernel call per seed and return the raw arrays."""
    R = len(seeds)
    T, P, NR, NM = cn.n_transitions, cn.n_places, cn.n_resources, cn.n_members
    G = len(cn.gate_names)
    S = steps if samples else 0
    L = trace_limit
    GL = gate_log_capacity(cn, steps, warmup, samples)
    rmax = int(cn.g_rmax.max()) + 1 if G else 1
    out = RunOutput(
        seeds=list(seeds),
        f=np.zeros((R, N_OF)), i=np.zeros((R, N_OI), dtype=np.int64),
        step_t=np.zeros((R, S)), step_tr=np.zeros((R, S), dtype=np.int64),
        firings=np.zeros((R, T), dtype=np.int64), busy=np.zeros((R, NR)),
        wait_sum=np.zeros((R, NR)), wait_n=np.zeros((R, NR), dtype=np.int64),
        tr_t=np.zeros((R, L), dtype=np.int64), tr_s=np.zeros((R, L)), tr_e=np.zeros((R, L)),
        glog=np.zeros((R, GL, 2), dtype=np.int64), ghist=np.zeros((R, G, rmax), dtype=np.int64),
        marking=np.zeros((R, P), dtype=np.int64), gcount=np.zeros((R, NM), dtype=np.int64),
        greleased=np.zeros((R, NM), dtype=np.int64),
    )
    seeds_arr = np.array([s & (2**64 - 1) for s in seeds], dtype=np.uint64)
    fn = run_parallel_kernel if (parallel and R > 1) else run_serial_kernel
    fn(cn.kernel_args(), seeds_arr, np.int64(steps), np.int64(warmup), np.int64(max_events),
       np.int64(zeno_limit), bool(samples), np.int64(trace_limit),
       out.f, out.i, out.step_t, out.step_tr, out.firings, out.busy, out.wait_sum, out.wait_n,
       out.tr_t, out.tr_s, out.tr_e, out.glog, out.ghist, out.marking, out.gcount, out.greleased)
    return out
