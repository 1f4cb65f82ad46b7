"""Firing durations: draws of each transition's own stream, times its modulator.

Invariant: firing k of transition t lasts draw k of t's stream (:mod:`sgdnet.engine.rng`:
counter-based, so a draw does not depend on the order events are processed in); ``sk[i]`` counts
the draws taken from row ``i`` (row ``nT + mi`` is modulator ``mi``'s stream). Log-normal and
exponential draws are inlined in the start path with the generator state in a register. A
modulator's value is the multiplier of the firings of the transitions it modulates: an iid one
is redrawn by the transitions that resample it (``F_RS``), a Markov one switches state at its
own exponential sojourns, caught up with the start time before it is read.
"""

from __future__ import annotations

import math

from ...dists import CODE_DET, CODE_EXP, CODE_LOGN
from ...net.compiled import MOD_IID, MOD_MARKOV
from ..layout import (
    F_MOD,
    F_RS,
    TF_PAR0,
    TF_PAR1,
    TS_CODE,
    TS_MOD,
)
from ..rng import (
    draw,
    exponential_draw,
    lognormal_draw,
    uniform_draw,
    uniform_pair,
)
from .jit import inner, phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', '../../dists.py', '../../net/compiled.py', '../layout.py', '../rng.py')


@inner
def modulators_init(nT, mod_kind, mod_par, sb, sk, d_code, d_par, d_pool, rng, modval, mk_state, mk_next):
    """Each modulator's first multiplier (an iid one's first draw, a Markov one's first state and
    sojourn), from draw 0 of its stream (row ``nT + mi``)."""
    for mi in range(mod_kind.size):
        j = nT + mi  # draw 0 of the modulator's stream
        if mod_kind[mi] == MOD_IID:
            modval[mi] = draw(sb[j], sk[j], d_code[j], d_par, j, d_pool, rng)
        else:  # a Markov modulator's first state (a uniform) and sojourn, from one draw
            sf = mod_par[mi, 0]
            mf = mod_par[mi, 1]
            ms = mod_par[mi, 2]
            ru, rv = uniform_pair(sb[j], sk[j])
            if ru < ms / (mf + ms):
                mk_state[mi] = 1
                modval[mi] = sf
                mk_next[mi] = -ms * math.log(1.0 - rv)
            else:
                mk_next[mi] = -mf * math.log(1.0 - rv)
        sk[j] += 1


@phase
def duration(t, f, now, nT, TS, TF, sb, sk, d_code, d_par, d_pool, rng, rs_ptr, rs_mod, modval,
              mod_kind, mod_par, mk_state, mk_next):
    """Start: the duration of ``t``'s next firing, draw ``sk[t]`` of its stream (log-normal and
    exponential draws inlined), times its modulator's value; first the modulators ``t``
    resamples (``F_RS``) draw their next value, and a Markov modulator catches up with ``now``."""
    if f & F_RS:
        for k in range(rs_ptr[t], rs_ptr[t + 1]):
            mi = rs_mod[k]
            j = nT + mi
            modval[mi] = draw(sb[j], sk[j], d_code[j], d_par, j, d_pool, rng)
            sk[j] += 1
    code = TS[t, TS_CODE]
    if code == CODE_DET:
        dur = TF[t, TF_PAR0]
    else:  # draw k of t's stream
        if code == CODE_LOGN:
            dur = lognormal_draw(sb[t], sk[t], TF[t, TF_PAR0], TF[t, TF_PAR1])
        elif code == CODE_EXP:
            dur = exponential_draw(sb[t], sk[t], TF[t, TF_PAR0])
        else:
            dur = draw(sb[t], sk[t], code, d_par, t, d_pool, rng)
        sk[t] += 1
    mi = TS[t, TS_MOD]
    if f & F_MOD:
        if mod_kind[mi] == MOD_MARKOV:
            while mk_next[mi] <= now:
                st = 1 - mk_state[mi]
                mk_state[mi] = st
                j = nT + mi  # the next draw of the modulator's stream
                rv = uniform_draw(sb[j], sk[j])
                sk[j] += 1
                if st == 1:
                    modval[mi] = mod_par[mi, 0]
                    mk_next[mi] += -mod_par[mi, 2] * math.log(1.0 - rv)
                else:
                    modval[mi] = 1.0
                    mk_next[mi] += -mod_par[mi, 1] * math.log(1.0 - rv)
        dur *= modval[mi]
    return dur
