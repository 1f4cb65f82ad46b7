"""The kernel's per-transition row tables and flag bits, shared by :mod:`sgdnet.engine.kernel`
and :mod:`sgdnet.engine.periodic` (plain module-level ints: numba folds them into the machine
code of both; both list this file in their ``JIT_DEPENDS``).

``TS`` (static, int64), ``TD`` (dynamic, int64) and ``TF`` (float64) hold one row per
transition, so that what an event touches sits in one or two cache lines.
"""

from __future__ import annotations

__all__ = ["NONE", "IN_IH", "N_TS", "N_TD", "N_TF"]

#: ``TD[t, TD_WHERE]``: not a candidate / in the instant queue (else the resource it waits at)
NONE, IN_IH = -1, -2
# columns of TS: flags, servers, arc ranges, queued / shared resource ranges, scan key, sampler
TS_FL, TS_SERV, TS_IN0, TS_IN1, TS_OUT0, TS_OUT1, TS_Q0, TS_Q1 = 0, 1, 2, 3, 4, 5, 6, 7
TS_PCLS, TS_RANK, TS_CODE, TS_GUARD, TS_MOD, TS_PS0, TS_PS1 = 8, 9, 10, 11, 12, 13, 14
N_TS = 16
# columns of TD: running firings, pending requests, where the candidate waits, the resource whose
# queue promoted it, its position in the instant queue, its request ring (offset, head, capacity)
TD_ACT, TD_DEG, TD_WHERE, TD_FROM, TD_CPOS, TD_RQOFF, TD_RQHEAD, TD_RQCAP = 0, 1, 2, 3, 4, 5, 6, 7
N_TD = 8
# columns of TF: the oldest request's time (the scan key), the sampler's two parameters
TF_KTIME, TF_PAR0, TF_PAR1 = 0, 1, 2
N_TF = 4
# per-transition flag bits (computed once per replication from the compiled arrays)
F_SELF, F_W1, F_INH, F_GUARD, F_RS, F_MOD, F_PS, F_CNT, F_STEP, F_QRES, F_S1 = 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024
F_JOIN = 2048
F_FLOW = 4096  # a transfer: its shared resources are links (discipline flow), its work is bytes
F_SW = 8192  # a random switch (weighted, and the net has at least two weighted transitions)
F_BACKLOG = 16384  # a join stage: a firing also waits the queue of a link (Transition.backlog)
