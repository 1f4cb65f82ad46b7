"""Join stages (``Transition.backlog``): the queue a link holds when a message joins it.

Invariant: a flow keeps in its links' queues what it has fallen behind its pace (the rate it
would have alone: its cap and its path's slowest link) since it started, plus ``s_lag0``, what
its connection had sent beyond the message before it when that one ended at the instant this
one started; a join stage on link ``r`` with bound ``q`` waits ``sum over r's flows of min(q,
lag, left) / bandwidth(r)``. A flow alone on its path at its pace falls behind by nothing, and
flows that start together have moved nothing: the queue builds only while flows share. The
reference oracle (:func:`sgdnet.engine.reference_model.backlog`) plays the same rule.
"""

from __future__ import annotations

from ..layout import TS_PS0, TS_PS1, TS_Q0, TS_Q1
from . import flows
from .jit import inner, phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', 'flows.py', '../layout.py')


@inner
def any_backlog(jn_link):
    """Whether some transition is a join stage (its connections' lags are then kept)."""
    for t in range(jn_link.size):
        if jn_link[t] >= 0:
            return True
    return False


@inner
def pace_of(t, TS, psres_idx, fl_cap, r_bw):
    """The rate transfer ``t`` would have alone: its cap and its path's slowest bandwidth."""
    pace = fl_cap[t]
    for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
        bw = r_bw[psres_idx[k]]
        if bw < pace:
            pace = bw
    return pace


@inner
def backlog_wait(r, q, now, r_ps, ps_h, ps_n, s_size, s_start, s_lag0, s_trans, TS, psres_idx,
                 fl_cap, s_grp, s_vf, g_V, g_rate, g_tau, s_rem, s_rate, s_last, r_bw):
    """Seconds a join stage on link ``r`` waits at ``now``: the bytes the flows holding ``r``
    keep in its queue, over ``r``'s bandwidth. A flow sends at its pace (the rate it would have
    alone: its cap and its path's slowest link) and its bytes beyond what it has moved wait in
    the queue: ``min(q, lag0 + pace * (now - start) - moved, left)``, at most ``q`` (its
    window's excess) and no more than it has left; ``lag0`` (``s_lag0``) is what its connection
    had sent beyond the message before it when that one ended at the very instant this one
    started (:func:`carry_out`): a connection streaming messages back to back keeps its queue.
    A flow alone on its path queues nothing, nor do flows that start at this instant: the queue
    builds only while flows share."""
    rp = r_ps[r]
    b = 0.0
    for i in range(ps_n[rp]):
        o = ps_h[rp, i]
        pace = pace_of(s_trans[o], TS, psres_idx, fl_cap, r_bw)
        left = flows.remaining(o, now, s_grp, s_vf, g_V, g_rate, g_tau, s_rem, s_rate, s_last)
        x = s_lag0[o] + pace * (now - s_start[o]) - (s_size[o] - left)
        if left < x:
            x = left
        if q < x:
            x = q
        if x > 0.0:
            b += x
    return b / r_bw[r]


@phase
def carry_out(t, s, now, TS, psres_idx, qres_idx, fl_cap, r_bw, s_start, s_size, s_lag0, c_lag,
              c_t):
    """Completion of flow ``s`` of ``t`` in a net with join stages: what its connection had
    sent beyond it (``lag0 + pace * age - bytes``, at least 0) is left on each of its queued
    resources (its connection) for a message that starts there at this instant."""
    lag = s_lag0[s] + pace_of(t, TS, psres_idx, fl_cap, r_bw) * (now - s_start[s]) - s_size[s]
    if lag < 0.0:
        lag = 0.0
    for k in range(TS[t, TS_Q0], TS[t, TS_Q1]):
        c_lag[qres_idx[k]] = lag
        c_t[qres_idx[k]] = now


@phase
def carry_in(t, s, now, TS, qres_idx, s_lag0, c_lag, c_t):
    """Start of flow ``s`` of ``t`` in a net with join stages: the lag a message of one of its
    queued resources (its connection) that ended at this instant left there, else 0."""
    s_lag0[s] = 0.0
    for k in range(TS[t, TS_Q0], TS[t, TS_Q1]):
        r = qres_idx[k]
        if c_t[r] == now:
            s_lag0[s] = c_lag[r]
            break


