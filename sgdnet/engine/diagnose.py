"""Failure reports of a simulation: deadlock (marking and stuck transitions, with a hint of what
to fix), exhausted event budget, and time that stopped advancing (a zero-duration cycle)."""

from __future__ import annotations

import math

import numpy as np

from ..dists import CODE_DET
from ..errors import DeadlockError, SimulationError
from ..limits import check_limit, limit
from ..net.compiled import CompiledNet
from . import abi as K

__all__ = ["stuck_transitions", "raise_on_failure", "zeno_limit", "check_run_size"]


def check_run_size(steps: int, warmup: int, replications: int, samples: bool,
                   trace_limit: int) -> None:
    """Refuse a run whose step counters or output arrays exceed :data:`sgdnet.limits.LIMITS`,
    before anything is allocated.

    Raises
    ------
    SimulationError
        ``warmup + steps`` beyond ``max_steps``, or output arrays (8 bytes per kept step time and
        its transition, 24 per traced firing, per replication) beyond ``max_output_bytes``.
    """
    check_limit("warmup + steps", warmup + steps, "max_steps")
    per_rep = 16 * (steps if samples else 0) + 24 * trace_limit
    need = per_rep * replications
    if need > limit("max_output_bytes"):
        what = "steps" if samples and 16 * steps >= 24 * trace_limit else "trace_limit"
        fix = ("pass samples=False (counters only)" if what == "steps"
               else "lower trace_limit") + " or fewer replications"
        raise SimulationError(
            f"steps={steps}, replications={replications}, samples={samples}, "
            f"trace_limit={trace_limit} need {need / 2**30:.3g} GiB of output arrays, beyond the "
            f"limit {limit('max_output_bytes') / 2**30:.3g} GiB (max_output_bytes); {fix}, or "
            "raise the limit with SGDNET_MAX_OUTPUT_BYTES=N")


def zeno_limit(n_transitions: int) -> int:
    """Completions at one instant after which time is declared stopped."""
    return max(10**6, 1000 * n_transitions)


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
                gated = ((not greleased[gm] and lead > cn.g_slow[g])
                         or (cn.g_cap[g] >= 0 and lead > cn.g_cap[g]))
        if inhibited or gated:
            out.append(cn.transition_names[t])
    return out


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


def raise_on_failure(cn: CompiledNet, out, max_events: int, steps: int, warmup: int) -> None:
    """Raise the report of the first replication of ``out`` (a driver ``RunOutput``) that did not
    end normally: :class:`DeadlockError` or :class:`SimulationError` (budget, stopped time)."""
    for k in range(len(out.seeds)):
        st = int(out.i[k, K.OI_STATUS])
        if st == K.ST_OK:
            if steps > 0 and not float(out.f[k, K.OF_T1]) > float(out.f[k, K.OF_T0]):
                st = K.ST_ZENO  # every counted step at one instant: steps/s would be inf
            else:
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
        zero = [n for n, c, p in zip(cn.transition_names, cn.d_code, cn.d_par) if c == CODE_DET and p[0] == 0.0]
        events = int(out.i[k, K.OI_EVENTS])
        cycle = (f"a cycle of zero-duration transitions fires forever (zero-duration "
                 f"transitions: {zero[:20]}); give one of them a duration")
        if int(out.i[k, K.OI_STATUS]) != K.ST_OK:
            raise SimulationError(
                f"{where}: time stopped advancing ({events} completions, more than "
                f"{zeno_limit(cn.n_transitions)} at one instant); {cycle}")
        # every counted step at one instant, but the run ended normally: either several step
        # transitions complete together (a synchronous net's workers) or a zero-time cycle
        n_step = int(cn.is_step.sum())
        raise SimulationError(
            f"{where}: no time passed between the first and the last of the steps={steps} "
            f"counted step completions (all at t={float(out.f[k, K.OF_T1]):.6g}s, "
            f"{events} completions in all), so steps/s would be infinite. If several step "
            f"transitions complete at one instant (the {n_step} step transitions "
            f"of a synchronous net's workers do), count more steps than complete together, "
            f"e.g. steps={max(2 * n_step, steps + 1)} (predict() counts steps per "
            f"worker for you); otherwise time stopped advancing: {cycle}")
