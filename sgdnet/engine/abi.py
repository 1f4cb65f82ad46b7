"""The kernel's interface in one place: its argument order, its output arrays, their slots and the
status codes, and :func:`unpack` (the output arrays of one replication -> its
:class:`~sgdnet.results.RawReplication`).

:func:`sgdnet.engine.kernel.run_replication` takes, in this order (:data:`SIGNATURE`):

1. the compiled net's arrays (:data:`NET_ARGS`: kernel parameter, :class:`CompiledNet` attribute);
2. the run's scalars (:data:`RUN_ARGS`: seed, budgets, starting capacities);
3. the main output arrays (:data:`OUTPUTS`), one row per replication of a :class:`RunOutput`;
4. the control arrays ``halt`` (int64[1], shared by every call of a run: non-zero stops the
   kernels) and ``prog`` (int64[1] per replication: step completions so far);
5. the random-switch arrays of the net (:data:`SWITCH_ARGS`);
6. the statistics outputs (:data:`STAT_OUTPUTS`), then the optional histograms
   (:data:`HIST_OUTPUTS`, arrays with no rows unless ``histograms=True``: the kernel tests that at
   run time, so one compiled specialization serves both).

Adding a kernel argument or output means adding a row here and using it in the kernel body; the
driver allocates, orders and resets from these tables and :func:`unpack` reads them back
(``tests/test_engine_abi.py`` checks the tables against the kernel's signature).

The constants are plain module-level ints so that Numba folds them into the kernel (which
imports them from here). Numba's on-disk cache is keyed by ``kernel.py`` only, so this file is in
the kernel's ``JIT_DEPENDS``: :mod:`sgdnet.engine.jitcache` recompiles the kernel when it changed.
This module imports nothing heavy (numpy and the results' record type).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..results import HIST_BINS, RawReplication

if TYPE_CHECKING:
    from ..net.compiled import CompiledNet

__all__ = ["SIGNATURE", "NET_ARGS", "RUN_ARGS", "OUTPUTS", "CONTROL_ARGS", "SWITCH_ARGS",
           "STAT_OUTPUTS", "HIST_OUTPUTS", "RunOutput", "allocate", "net_args", "run_args",
           "call_args", "unpack", "gate_log_capacity", "lead_bins"]

# ------------------------------------------------------------------ status codes (o_i[OI_STATUS])
ST_OK, ST_DEADLOCK, ST_BUDGET, ST_ZENO, ST_GROW, ST_HALTED = 0, 1, 2, 3, 4, 5
#: bits of ``o_i[OI_GROW]`` with ``ST_GROW``: which table was too small (the driver replays with 4x)
GROW_SLOTS, GROW_REQUESTS, GROW_HOLDERS = 1, 2, 4

# ------------------------------------------------------------------ slots of the scalar outputs
# o_f (float64): window start and end (first and last counted step completion), time at the end,
# the period's duration when the run skipped periods of a periodic regime (sgdnet.engine.periodic)
OF_T0, OF_T1, OF_NOW, OF_CYCLE = 0, 1, 2, 3
N_OF = 4
# o_i (int64): status, completions, step completions (warm-up included), kept trace entries,
# logged gate decisions, kept step samples, grow bits; with skipped periods: the step completions
# at the start of the period that was repeated, its step completions, the step completions skipped
# after the warm-up and in it
OI_STATUS, OI_EVENTS, OI_NSTEPS, OI_NTRACE, OI_NGLOG, OI_NREC, OI_GROW = 0, 1, 2, 3, 4, 5, 6
OI_PSTART, OI_PERIOD, OI_PSKIP, OI_PWSKIP = 7, 8, 9, 10
N_OI = 11

# ------------------------------------------------------------------ arguments, in order
#: (kernel parameter, CompiledNet attribute): the net's arrays, first in the kernel's signature
NET_ARGS = tuple((f, f) for f in (
    "m0", "dep_ptr", "dep_trans",
    "in_ptr", "in_place", "in_w", "out_ptr", "out_place", "out_w", "inh_ptr", "inh_place", "inh_thr",
    "r_cap", "r_disc", "r_ps", "r_users", "rq_base",
    "qres_ptr", "qres_idx", "psres_ptr", "psres_idx",
    "r_bw", "re_ptr", "re_val", "r_tb", "fl_cap", "jn_link", "jn_q",
    "servers")) + (("pcls", "prio_class"),) + tuple((f, f) for f in (
        "rank", "is_step", "mod_of", "guard",
        "d_code", "d_par", "d_pool",
        "g_kind", "g_s", "g_slow", "g_rmax", "g_ptr", "mem_gate", "mem_counter",
        "cnt_ptr", "cnt_mem", "gg_ptr", "gg_trans", "mg_ptr", "mg_trans", "g_cap",
        "mod_kind", "mod_par", "rs_ptr", "rs_mod", "sid"))
#: (kernel parameter, numpy scalar type): the run's scalars, after the net's arrays
RUN_ARGS = (
    ("seed", np.uint64), ("steps", np.int64), ("warmup", np.int64), ("max_events", np.int64),
    ("zeno_limit", np.int64), ("samples", bool), ("trace_limit", np.int64),
    ("cap_slots", np.int64), ("cap_requests", np.int64), ("cap_holders", np.int64),
    ("period", np.int64),
)
#: (kernel parameter, RunOutput attribute, dtype, shape per replication): the main outputs.
#: Dimensions: S kept step samples, T transitions, P places, NR resources, NM gate members,
#: G gates, L trace limit, GL gate-log capacity, RMAX DSSP r* bins, LB lead bins, H histogram
#: rows (NR with histograms, else 0), HB :data:`~sgdnet.results.HIST_BINS`.
OUTPUTS = (
    ("o_f", "f", np.float64, ("N_OF",)),
    ("o_i", "i", np.int64, ("N_OI",)),
    ("o_step_t", "step_t", np.float64, ("S",)),
    ("o_step_tr", "step_tr", np.int64, ("S",)),
    ("o_firings", "firings", np.int64, ("T",)),
    ("o_busy", "busy", np.float64, ("NR",)),
    ("o_wsum", "wait_sum", np.float64, ("NR",)),
    ("o_wn", "wait_n", np.int64, ("NR",)),
    ("o_tr_t", "tr_t", np.int64, ("L",)),
    ("o_tr_s", "tr_s", np.float64, ("L",)),
    ("o_tr_e", "tr_e", np.float64, ("L",)),
    ("o_glog", "glog", np.int64, ("GL", 2)),  # (gate, r*) per logged DSSP decision
    ("o_ghist", "ghist", np.int64, ("G", "RMAX")),  # DSSP decisions by r*
    ("o_mark", "marking", np.int64, ("P",)),  # the final marking (deadlock reports)
    ("o_gcnt", "gcount", np.int64, ("NM",)),
    ("o_grel", "greleased", np.int64, ("NM",)),
    ("o_glead", "glead", np.int64, ("G", "LB")),  # member completions by lead (last bin: or more)
)
#: kernel parameters of the control arrays (after the main outputs)
CONTROL_ARGS = ("halt", "prog")
#: (kernel parameter, CompiledNet attribute): the random switches (after the control arrays)
SWITCH_ARGS = (("sw_w", "sw_w"), ("sw_prio", "sw_prio"), ("sw_res", "sw_res"))
#: outputs after the switches: the marking integral over the window and the sojourn sums/counts
STAT_OUTPUTS = (
    ("o_ptok", "token_time", np.float64, ("P",)),
    ("o_ssum", "sojourn_sum", np.float64, ("NR",)),
    ("o_sn", "sojourn_n", np.int64, ("NR",)),
)
#: the last outputs, allocated with H = 0 rows (and reported as None) unless histograms are asked for
HIST_OUTPUTS = (
    ("o_hw", "wait_hist", np.int64, ("H", "HB")),
    ("o_hs", "sojourn_hist", np.int64, ("H", "HB")),
)
_ALL_OUTPUTS = OUTPUTS + STAT_OUTPUTS + HIST_OUTPUTS

#: every kernel parameter, in order
SIGNATURE = (tuple(p for p, _ in NET_ARGS) + tuple(p for p, _ in RUN_ARGS)
             + tuple(p for p, *_ in OUTPUTS) + CONTROL_ARGS + tuple(p for p, _ in SWITCH_ARGS)
             + tuple(p for p, *_ in STAT_OUTPUTS) + tuple(p for p, *_ in HIST_OUTPUTS))


def gate_log_capacity(cn: CompiledNet, steps: int, warmup: int, samples: bool) -> int:
    """Room for logged DSSP controller decisions per replication (histograms are always kept)."""
    if not samples or not any(k == "dynamic_lag" for k in cn.gate_kinds):
        return 0
    return 2 * (steps + warmup) + 1024


def lead_bins(cn: CompiledNet) -> int:
    """Bins of the per-gate lead histograms: leads ``0..B-2`` exactly, the last bin ``>= B-1``
    (at least twice any bound the gates declare)."""
    if not len(cn.gate_names):
        return 1
    bound = int(max(cn.g_s.max(), (cn.g_slow + cn.g_rmax).max(), cn.g_cap.max()))
    return max(64, 2 * bound + 2)


class RunOutput:
    """The raw output arrays of a batch of replications (first axis: replication), one attribute
    per row of :data:`OUTPUTS`, :data:`STAT_OUTPUTS` and :data:`HIST_OUTPUTS`, and ``seeds``."""

    def __init__(self, seeds: list[int], histograms: bool, **arrays: np.ndarray):
        self.seeds = list(seeds)
        self.histograms = histograms
        for name, a in arrays.items():
            setattr(self, name, a)

    def rows(self, k: int) -> dict[str, Any]:
        """Kernel parameter -> replication ``k``'s output array (a histogram not kept has no rows)."""
        return {p: getattr(self, a)[k] for p, a, *_ in _ALL_OUTPUTS}


def allocate(cn: CompiledNet, seeds: list[int], *, steps: int, warmup: int, samples: bool, trace_limit: int,
             histograms: bool) -> RunOutput:
    """Zeroed output arrays for one kernel call per seed (shapes from the tables above)."""
    G = len(cn.gate_names)
    dims = {"N_OF": N_OF, "N_OI": N_OI, "S": steps if samples else 0, "T": cn.n_transitions,
            "P": cn.n_places, "NR": cn.n_resources, "NM": cn.n_members, "G": G, "L": trace_limit,
            "GL": gate_log_capacity(cn, steps, warmup, samples),
            "RMAX": int(cn.g_rmax.max()) + 1 if G else 1, "LB": lead_bins(cn),
            "H": cn.n_resources if histograms else 0, "HB": HIST_BINS}
    R = len(seeds)
    arrays = {a: np.zeros((R, *(d if isinstance(d, int) else dims[d] for d in shape)), dtype=dt)
              for _, a, dt, shape in _ALL_OUTPUTS}
    return RunOutput(seeds, histograms, **arrays)


def net_args(cn: CompiledNet) -> dict[str, Any]:
    """Kernel parameter -> array of the compiled net (:data:`NET_ARGS` and :data:`SWITCH_ARGS`)."""
    return {p: getattr(cn, a) for p, a in NET_ARGS + SWITCH_ARGS}


def run_args(**values: Any) -> dict[str, Any]:
    """Every :data:`RUN_ARGS` parameter (all must be given) converted to the kernel's type."""
    return {p: typ(values[p]) for p, typ in RUN_ARGS}


def call_args(fixed: dict[str, Any], rows: dict[str, Any]) -> tuple:
    """The kernel's positional arguments: ``fixed`` (e.g. :func:`net_args`, :func:`run_args`
    and the control arrays) and ``rows`` (a replication's :meth:`RunOutput.rows` and its
    ``prog``) hold every parameter of :data:`SIGNATURE`."""
    vals = {**fixed, **rows}
    return tuple(vals[p] for p in SIGNATURE)


def unpack(out: RunOutput, k: int, samples: bool) -> RawReplication:
    """Replication ``k``'s record, copied out of the output arrays (the kept step samples, trace
    entries and gate decisions only; without samples the gate decisions are rebuilt, as a
    multiset, from their histograms)."""
    nrec = int(out.i[k, OI_NREC]) if samples else 0
    ntr = int(out.i[k, OI_NTRACE])
    ngl = min(int(out.i[k, OI_NGLOG]), out.glog.shape[1])
    if samples:
        glog = out.glog[k, :ngl].copy()
    else:  # the multiset of decisions, from the histograms
        g, r = np.nonzero(out.ghist[k])
        cnt = out.ghist[k][g, r]
        glog = (np.stack([np.repeat(g, cnt), np.repeat(r, cnt)], axis=1) if cnt.size
                else np.zeros((0, 2), np.int64))
    return RawReplication(
        t0=float(out.f[k, OF_T0]), t1=float(out.f[k, OF_T1]),
        step_times=out.step_t[k, :nrec].copy(), step_trans=out.step_tr[k, :nrec].copy(),
        firings=out.firings[k].copy(), busy=out.busy[k].copy(), wait_sum=out.wait_sum[k].copy(),
        wait_n=out.wait_n[k].copy(), trace_trans=out.tr_t[k, :ntr].copy(),
        trace_start=out.tr_s[k, :ntr].copy(), trace_end=out.tr_e[k, :ntr].copy(),
        gate_log=glog, events=int(out.i[k, OI_EVENTS]), gate_lead=out.glead[k].copy(),
        token_time=out.token_time[k].copy(), sojourn_sum=out.sojourn_sum[k].copy(),
        sojourn_n=out.sojourn_n[k].copy(),
        wait_hist=out.wait_hist[k].copy() if out.histograms else None,
        sojourn_hist=out.sojourn_hist[k].copy() if out.histograms else None,
        periodic=(None if not (out.i[k, OI_PSKIP] or out.i[k, OI_PWSKIP]) else
                  (int(out.i[k, OI_PSTART]), int(out.i[k, OI_PERIOD]), float(out.f[k, OF_CYCLE]),
                   int(out.i[k, OI_PSKIP]), int(out.i[k, OI_PWSKIP]))),
    )
