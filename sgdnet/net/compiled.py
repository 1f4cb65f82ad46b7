"""CompiledNet: a validated :class:`~sgdnet.net.Net` flattened into arrays for the Numba kernel.

Layout (structure of arrays; ``T`` transitions, ``P`` places, ``R`` resources, ``G`` gates,
``NM`` gate members, ``M`` modulators; every index array is ``int64``, every CSR is a
``(ptr, idx)`` pair with ``ptr`` of length ``n + 1``):

- places: ``m0`` (P,) initial marking; ``dep_ptr/dep_trans`` place -> transitions whose degree
  reads it (consumers and inhibited transitions, deduplicated);
- arcs per transition: ``in_ptr/in_place/in_w``, ``out_ptr/out_place/out_w``,
  ``inh_ptr/inh_place/inh_thr``;
- resources: ``r_cap`` (R,), ``r_disc`` (R,) (0 fifo, 1 priority, 2 ps, 3 flow), ``r_ps`` (R,)
  index among shared (ps and flow) resources or -1; per transition ``qres_ptr/qres_idx`` (queued,
  i.e. fifo/priority, resources) and ``psres_ptr/psres_idx`` (shared resources: ps resources, or
  the links of a transfer's path); ``r_users`` (R,) number of transitions holding r; ``rq_base``
  (R+1,) offsets of each resource's waiting queue in one shared array;
- links: ``r_bw`` (R,) bandwidth in bytes/s (0 for other resources), ``re_ptr/re_val`` the
  efficiency factors by number of flows (CSR; empty means 1), and after them, when some link
  has one, the ACK paths (:meth:`Net.ack_path`; :func:`_ack_arrays`, its pointers into
  ``re_val``), ``r_tb`` (R, 2) each link's token
  bucket (burst bytes, peak bytes/s; a row of zeros: none); per transition ``fl_cap`` (T,) the
  rate cap of a transfer in bytes/s (``inf`` when none); ``jn_link`` (T,) the link a join stage
  (``Transition.backlog``) waits the queue of, -1 for other transitions, ``jn_q`` (T,) the bytes
  one transfer keeps queued there at most;
- transitions: ``servers`` (T,) (``math.inf`` encoded as :data:`INF_SERVERS`), ``priority``,
  ``prio_class`` (the priority if t holds a priority resource else 0), ``rank`` (position of t in
  the (priority, declaration index) order), ``is_step`` (0/1), ``worker`` (tag or -1),
  ``mod_of`` (modulator index or -1), ``guard`` (global gate-member index or -1);
- distributions: ``d_code`` (T+M,), ``d_par`` (T+M, 6), ``d_pool``: rows ``0..T-1`` are the
  transitions' durations, row ``T+k`` the multiplier of modulator ``k`` (iid; unused for markov);
- gates: ``g_kind`` (0 lag, 1 dynamic_lag), ``g_s``, ``g_slow``, ``g_rmax``, ``g_ptr`` (G+1,)
  member offsets; per member ``mem_gate``, ``mem_counter``; CSRs ``cnt_ptr/cnt_mem`` (transition ->
  members it counts), ``gg_ptr/gg_trans`` (gate -> guarded transitions), ``mg_ptr/mg_trans``
  (member -> guarded transitions), ``g_cap`` (G,) a ``dynamic_lag`` gate's hard cap ``s_upper``
  (-1: none);
- modulators: ``mod_kind`` (0 iid, 1 markov), ``mod_par`` (M, 3) = (slow_factor, mean_fast,
  mean_slow); ``rs_ptr/rs_mod`` transition -> iid modulators it resamples when it starts;
- random switches (passed after the kernel's outputs, :data:`sgdnet.engine.abi.SWITCH_ARGS`):
  ``sw_w`` (T,) weight (0.0: not weighted), ``sw_prio`` (T,) the priority (weighted transitions
  tie on it), ``sw_res`` the queued resources held by some weighted transition (the queues where
  a competing weighted candidate may wait).

:func:`compile_net` returns the very same object for the same (unchanged) Net, and, for an
equal net built again, the one compiled before: compiled nets are shared by a hash of their
content (:func:`content_key`). A net of more than :data:`HASH_MAX_ELEMENTS` places and
transitions is not hashed (an equal net built again is compiled again), only remembered.
"""

from __future__ import annotations

import hashlib
import marshal
import math
import weakref
from collections import OrderedDict
from itertools import chain
from typing import Any

import numpy as np

from .._gc import paused_gc
from ..dists import Distribution, Empirical, Straggler, deterministic_rows, flatten
from ..errors import NetError
from .builder import Net
from .problems import COLUMNS, arcs_csr, transition_columns

__all__ = ["CompiledNet", "compile_net", "INF_SERVERS", "DISC_CODES", "DISC_FIFO",
           "DISC_PRIORITY", "DISC_PS", "DISC_FLOW", "GATE_LAG", "GATE_DYNAMIC_LAG", "MOD_IID",
           "MOD_MARKOV"]

INF_SERVERS = 1 << 62
#: The integer codes of the compiled arrays ``r_disc``, ``g_kind`` and ``mod_kind``, named
#: here and read by the kernel (:mod:`sgdnet.engine.kernel`, where numba folds them).
DISC_FIFO, DISC_PRIORITY, DISC_PS, DISC_FLOW = 0, 1, 2, 3
GATE_LAG, GATE_DYNAMIC_LAG = 0, 1
MOD_IID, MOD_MARKOV = 0, 1
DISC_CODES = {"fifo": DISC_FIFO, "priority": DISC_PRIORITY, "ps": DISC_PS, "flow": DISC_FLOW}
_SHARED = ("ps", "flow")  # disciplines whose holders share a rate instead of queueing
_GATE_CODES = {"lag": GATE_LAG, "dynamic_lag": GATE_DYNAMIC_LAG}
_MOD_CODES = {"iid": MOD_IID, "markov": MOD_MARKOV}

_I = np.int64
_F = np.float64

def _csr(lists: list[list]) -> tuple[np.ndarray, np.ndarray]:
    n = len(lists)
    ptr = np.zeros(n + 1, dtype=_I)
    np.cumsum(np.fromiter(map(len, lists), dtype=_I, count=n), out=ptr[1:])
    idx = np.fromiter(chain.from_iterable(lists), dtype=_I, count=int(ptr[-1]))
    return ptr, idx


def _csr_rows(n: int, rows: list[int] | np.ndarray,
              vals: list[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`_csr` makes of ``n`` lists when entry ``k`` appends ``vals[k]`` to list
    ``rows[k]`` (in entry order), without making the lists: O(entries) Python work, not O(n)."""
    rows = np.asarray(rows, dtype=_I).reshape(-1)
    ptr = np.zeros(n + 1, dtype=_I)
    np.cumsum(np.bincount(rows, minlength=n), out=ptr[1:])
    return ptr, np.asarray(vals, dtype=_I).reshape(-1)[np.argsort(rows, kind="stable")]


def _csr_of_kinds(lists: list[list[int]], kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`_csr` makes of ``[lists[k] for k in kind]`` (row ``t`` a copy of the list of
    its kind ``kind[t]``; a net has few kinds, e.g. distinct resource tuples), in numpy."""
    lens = np.fromiter(map(len, lists), dtype=_I, count=len(lists))
    off = np.zeros(len(lists) + 1, dtype=_I)
    np.cumsum(lens, out=off[1:])
    flat = np.fromiter(chain.from_iterable(lists), dtype=_I, count=int(off[-1]))
    n = lens[kind]
    ptr = np.zeros(kind.size + 1, dtype=_I)
    np.cumsum(n, out=ptr[1:])
    return ptr, flat[np.repeat(off[:-1][kind] - ptr[:-1], n) + np.arange(ptr[-1], dtype=_I)]


def _readers(n_places: int, in_ptr: np.ndarray, in_place: np.ndarray, inh_ptr: np.ndarray,
             inh_place: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR place -> the transitions that read it (consumers and inhibited transitions), each
    once, in increasing order."""
    nT = len(in_ptr) - 1
    tr = np.concatenate([np.repeat(np.arange(nT, dtype=_I), np.diff(in_ptr)),
                         np.repeat(np.arange(nT, dtype=_I), np.diff(inh_ptr))])
    pl = np.concatenate([in_place, inh_place])
    key = np.sort(pl * max(nT, 1) + tr)  # by place, then transition
    if key.size:
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]  # each pair once
    ptr = np.zeros(n_places + 1, dtype=_I)
    np.cumsum(np.bincount(key // max(nT, 1), minlength=n_places), out=ptr[1:])
    return ptr, (key % max(nT, 1)).astype(_I)


def _dist_key(d: Distribution):
    if isinstance(d, Empirical):
        return ("Empirical", hashlib.sha1(np.ascontiguousarray(d.samples).tobytes()).hexdigest())
    if isinstance(d, Straggler):
        return ("Straggler", _dist_key(d.base), d.p, d.factor)
    return repr(d.to_dict())


def structural_key(net: Net) -> str:
    """A hash of everything the compiled form and the results depend on, made from the net.

    For comparing nets (the bulk builders' tests compare their nets with the checked builders'
    by it); :func:`compile_net` keys compiled nets by :func:`content_key`, which costs a
    fraction of this. Cached on the net against :meth:`Net.edit_stamp` (so hashing an
    unchanged net again is free); any edit the stamp sees recomputes it.
    """
    stamp = net.edit_stamp()
    cached = net.__dict__.get("_key_cache")
    if cached is not None and cached[0] == stamp:
        return cached[1]
    key = _structural_key(net)
    net.__dict__["_key_cache"] = (stamp, key)
    return key


def _structural_key(net: Net) -> str:
    try:  # marshal: several times faster than repr for plain values
        data = marshal.dumps(_key_parts(net, True), 2)  # 2: no back-references (identity-free)
    except ValueError:  # a tag value marshal does not know (numpy scalar, object...)
        data = repr(_key_parts(net, False)).encode()
    return hashlib.sha1(data).hexdigest()


def _items(d: dict) -> tuple:
    return tuple(d.items())


def _key_parts(net: Net, fast: bool) -> list:
    """What the key hashes; tag dicts as item tuples (``fast``: marshal refuses dict
    subclasses) or their repr."""
    dkeys: dict[int, Any] = {}  # one key per distribution object (shared ones are common)
    for t in net.transitions.values():
        d = t.duration
        if id(d) not in dkeys:
            dkeys[id(d)] = _dist_key(d)
    tags = _items if fast else repr
    parts: list[Any] = [net.name]
    parts.append([(p.name, p.tokens, tags(p.tags)) for p in net.places.values()])
    parts.append([(r.name, r.capacity, r.discipline, tags(r.tags), r.bandwidth, r.latency,
                   r.efficiency) + ((r.burst, r.peak) if r.burst else ())
                  + (() if r.ack_path is None else (("ack",) + r.ack_path,))
                  for r in net.resources.values()])
    parts.append([
        (t.name, dkeys[id(t.duration)], tuple(t.inputs.items()), tuple(t.outputs.items()),
         tuple(t.inhibitors.items()), t.resources, repr(t.servers), t.priority, tags(t.tags),
         t.modulator, t.gate, repr(t.flow_cap))
        + (() if t.weight is None else (repr(t.weight),))
        + (() if t.backlog is None else (("backlog",) + tuple(t.backlog),))
        for t in net.transitions.values()
    ])
    parts.append([(g.name, g.kind, g.counters, g.s, g.s_lower, g.r_max, g.s_upper) for g in net.gates.values()])
    parts.append([
        (m.name, m.kind, None if m.multiplier is None else _dist_key(m.multiplier), m.resample_on,
         m.slow_factor, m.mean_fast, m.mean_slow)
        for m in net.modulators.values()
    ])
    return parts


#: the name of the random switches' stream (see :mod:`sgdnet.engine.rng`)
SWITCH_STREAM = "sgdnet:random-switch"


def stream_ids(names: list[str]) -> np.ndarray:
    """Random-stream ids (uint64) of names: the first 8 bytes of each name's BLAKE2b digest
    (see :mod:`sgdnet.engine.rng`)."""
    return np.array([int.from_bytes(hashlib.blake2b(n.encode(), digest_size=8).digest(), "little")
                     for n in names], dtype=np.uint64)


def net_stream_ids(transition_names: list[str], modulator_names: list[str]) -> np.ndarray:
    """The ids of a net's streams, in the engines' row order: one per transition, one per
    modulator (named ``"modulator:" + name``), then the random switches' (:data:`SWITCH_STREAM`)."""
    return stream_ids([*transition_names, *(f"modulator:{m}" for m in modulator_names),
                       SWITCH_STREAM])


def law_rows(durations: list[Distribution], modulators: list) -> list[Distribution]:
    """The laws the streams' rows draw from: the transitions' durations, then each modulator's
    multiplier (a unit constant for a Markov modulator, whose row draws only its switches)."""
    return [*durations] + [m.multiplier if m.kind == "iid" and m.multiplier is not None
                           else _unit() for m in modulators]


class CompiledNet:
    """The arrays of one net (see the module docstring for the layout) plus its names and tags.

    Attributes
    ----------
    name : str
        The net's name.
    place_names, transition_names, resource_names, gate_names, modulator_names : list of str
    transition_tags : list of dict
    transition_resources : list of tuple of str
    resource_tags : list of dict
    resource_capacity : list of int
    resource_discipline : list of str
    key : str
        The :func:`content_key` (or the key its maker gave: ``unhashed:...`` for a net
        compiled with ``share=False``, ``inputs:...`` from :mod:`sgdnet.netcache`).
    deterministic : bool
        True when the net has no randomness (every duration and modulator multiplier takes one
        fixed value): every replication is then the same trajectory, and
        :func:`sgdnet.simulate` plays it once.
    weighted : bool
        True when at least two transitions carry a random-switch ``weight`` (so that the kernel
        may draw among them; such a net is never ``deterministic``).
    """

    def __init__(self, net: Net, key: str | None = None):
        net.validate()
        self.key = key  # None: the content key, made last (content_key)
        self.name = net.name
        P, T = list(net.places.values()), list(net.transitions.values())
        Rs, Gs, Ms = list(net.resources.values()), list(net.gates.values()), list(net.modulators.values())
        nT, nP, nR = len(T), len(P), len(Rs)
        # one pass over the transitions for every field read below; the validation above made
        # that pass already (and looked every arc up) on an unchanged net
        kept = net._take_arcs()
        cols = (kept[3] if kept else transition_columns(T)) or [()] * len(COLUMNS)
        (t_names, t_tags, t_in, t_out, t_inh, t_res, t_srv, t_prio, t_mod, t_dur, t_cap,
         t_gate, t_weight, t_back) = cols
        t_res = tuple(r if type(r) is tuple else tuple(r) for r in t_res)  # a list set by hand
        self.place_names = [p.name for p in P]
        # name -> index tables of ~400 k places / transitions at 1,024 workers cost ~0.15 s
        # each: made only when something below looks names up (arcs not kept by the
        # validation; gates' counters and modulators' resample_on)
        pidx = None if kept else dict(zip(self.place_names, range(nP)))
        tidx = dict(zip(t_names, range(nT))) if Gs or Ms else {}
        ridx = {r.name: i for i, r in enumerate(Rs)}
        gidx = {g.name: i for i, g in enumerate(Gs)}
        midx = {m.name: i for i, m in enumerate(Ms)}

        self.transition_names = list(t_names)
        self.transition_tags = list(map(dict, t_tags))
        self.transition_resources = list(map(tuple, t_res))
        self.resource_names = [r.name for r in Rs]
        self.resource_tags = [dict(r.tags) for r in Rs]
        self.resource_capacity = [int(r.capacity) for r in Rs]
        self.resource_discipline = [r.discipline for r in Rs]
        self.gate_names = [g.name for g in Gs]
        self.gate_kinds = [g.kind for g in Gs]
        self.gate_members = [len(g.counters) for g in Gs]
        self.modulator_names = [m.name for m in Ms]
        step = [bool(tg.get("step", False)) for tg in t_tags]
        self.step_transitions = [i for i, s in enumerate(step) if s]
        self.no_input_inf = [t_names[i] for i in range(nT) if not t_in[i] and t_srv[i] == math.inf]

        self.m0 = np.array([p.tokens for p in P], dtype=_I)
        arcs = kept[:3] if kept else [arcs_csr(a, pidx) for a in (t_in, t_out, t_inh)]
        (self.in_ptr, self.in_place, self.in_w), (self.out_ptr, self.out_place, self.out_w), \
            (self.inh_ptr, self.inh_place, self.inh_thr) = arcs
        self.dep_ptr, self.dep_trans = _readers(nP, self.in_ptr, self.in_place, self.inh_ptr,
                                                self.inh_place)

        self.r_cap = np.array(self.resource_capacity, dtype=_I)
        self.r_disc = np.array([DISC_CODES[r.discipline] for r in Rs], dtype=_I)
        ps_list = [i for i, r in enumerate(Rs) if r.discipline in _SHARED]
        self.r_ps = np.full(nR, -1, dtype=_I)
        for k, i in enumerate(ps_list):
            self.r_ps[i] = k
        # a transition's resources, split once per distinct resource tuple (its kind: few of
        # them), then each transition's rows gathered from its kind's (numpy, not per transition)
        kinds = {rt: k for k, rt in enumerate(dict.fromkeys(t_res))}
        kind = np.fromiter(map(kinds.__getitem__, t_res), dtype=_I, count=nT)
        ixs = [[ridx[r] for r in rt] for rt in kinds]
        res_flat = _csr_of_kinds(ixs, kind)[1]
        self.r_users = np.bincount(res_flat, minlength=nR).astype(_I)
        self.rq_base = np.zeros(nR + 1, dtype=_I)
        self.rq_base[1:] = np.cumsum(self.r_users)
        self.qres_ptr, self.qres_idx = _csr_of_kinds(
            [[i for i in ix if Rs[i].discipline not in _SHARED] for ix in ixs], kind)
        self.psres_ptr, self.psres_idx = _csr_of_kinds(
            [[i for i in ix if Rs[i].discipline in _SHARED] for ix in ixs], kind)
        k_prio = np.array([any(Rs[i].discipline == "priority" for i in ix) for ix in ixs],
                          dtype=bool)
        self.r_bw = np.array([float(r.bandwidth) if r.discipline == "flow" else 0.0 for r in Rs], dtype=_F)
        effs = [list(r.efficiency) if r.discipline == "flow" else [] for r in Rs]
        self.re_ptr, _ = _csr([[0] * len(e) for e in effs])
        self.re_val = np.array([e for lst in effs for e in lst], dtype=_F)
        self.r_tb = np.zeros((nR, 2), dtype=_F)  # token buckets: (burst bytes, peak bytes/s)
        for i, r in enumerate(Rs):
            if r.discipline == "flow" and r.burst:
                self.r_tb[i] = (float(r.burst), r.peak_rate())
        self.fl_cap = np.array(t_cap, dtype=_F).reshape(nT)
        ak_i, ak_val = _ack_arrays(Rs, ridx)
        if ak_i.size:  # after the efficiencies' pointers and values (no kernel argument more)
            ak_i[nR:2 * nR + 1] += self.re_val.size
            self.re_ptr = np.concatenate([self.re_ptr, ak_i])
            self.re_val = np.concatenate([self.re_val, ak_val])
            # the transfers on a link of an ACK path count as capped (never a star component
            # for the kernel's fast path, whose flow counts would not reach the dependents)
            on = np.isin(self.psres_idx, np.flatnonzero((ak_i[:nR] >= 0)
                                                        | np.isin(np.arange(nR), ak_i[:nR])))
            who = np.repeat(np.arange(nT), np.diff(self.psres_ptr))[on]
            self.fl_cap[who] = np.minimum(self.fl_cap[who], ACK_MARK)
        # join stages (Transition.backlog): the link whose queue a firing waits, or -1, and the
        # bytes one of its transfers keeps queued at most
        self.jn_link = np.full(nT, -1, dtype=_I)
        self.jn_q = np.zeros(nT, dtype=_F)
        if set(t_back) != {None}:
            for i, b in enumerate(t_back):
                if b is not None:
                    self.jn_link[i] = ridx[b[0]]
                    self.jn_q[i] = float(b[1])

        self.servers = np.array([s if type(s) is int else (INF_SERVERS if s == math.inf else int(s))
                                 for s in t_srv], dtype=_I).reshape(nT)
        self.priority = np.array(t_prio, dtype=_I).reshape(nT)
        self.prio_class = np.where(k_prio[kind], self.priority, 0).astype(_I)
        self.rank = np.zeros(nT, dtype=_I)  # position in the (priority, index) order
        self.rank[np.argsort(self.priority, kind="stable")] = np.arange(nT, dtype=_I)
        self.is_step = np.array(step, dtype=_I).reshape(nT)
        self.worker = np.array([v if type(v) is int and v >= 0 else _int_tag(v)
                                for v in (tg.get("worker") for tg in t_tags)], dtype=_I).reshape(nT)
        self.mod_of = np.array([-1 if m is None else midx[m] for m in t_mod], dtype=_I).reshape(nT)

        self.d_code, self.d_par, self.d_pool = flatten(law_rows(t_dur, Ms))
        self.d_code = self.d_code.astype(_I)

        # gates
        self.g_kind = np.array([_GATE_CODES[g.kind] for g in Gs], dtype=_I)
        self.g_s = np.array([g.s for g in Gs], dtype=_I)
        self.g_slow = np.array([g.s_lower for g in Gs], dtype=_I)
        self.g_rmax = np.array([g.r_max for g in Gs], dtype=_I)
        self.g_cap = np.array([-1 if g.s_upper is None else g.s_upper for g in Gs], dtype=_I)
        self.g_ptr = np.zeros(len(Gs) + 1, dtype=_I)
        self.g_ptr[1:] = np.cumsum([len(g.counters) for g in Gs]) if Gs else []
        self.mem_gate = np.array([gi for gi, g in enumerate(Gs) for _ in g.counters], dtype=_I)
        self.mem_counter = np.array([tidx[c] for g in Gs for c in g.counters], dtype=_I)
        nm = len(self.mem_gate)
        self.cnt_ptr, self.cnt_mem = _csr_rows(nT, self.mem_counter, np.arange(nm))
        self.guard = np.full(nT, -1, dtype=_I)
        gg: list[list[int]] = [[] for _ in Gs]
        mg: list[list[int]] = [[] for _ in range(nm)]
        for i, tg in enumerate(t_gate):
            if tg is not None:
                gi = gidx[tg[0]]
                k = int(self.g_ptr[gi]) + int(tg[1])
                self.guard[i] = k
                gg[gi].append(i)
                mg[k].append(i)
        self.gg_ptr, self.gg_trans = _csr(gg)
        self.mg_ptr, self.mg_trans = _csr(mg)

        # modulators
        self.mod_kind = np.array([_MOD_CODES[m.kind] for m in Ms], dtype=_I)
        self.mod_par = np.array([[m.slow_factor, m.mean_fast, m.mean_slow] for m in Ms], dtype=_F).reshape(len(Ms), 3)
        rs = [(tidx[tn], mi) for mi, m in enumerate(Ms) if m.kind == "iid" for tn in m.resample_on]
        self.rs_ptr, self.rs_mod = _csr_rows(nT, [r for r, _ in rs], [mi for _, mi in rs])

        # random switches
        self.sw_w = np.array([0.0 if w is None else float(w) for w in t_weight], dtype=_F).reshape(nT)
        self.sw_prio = self.priority.copy()
        self.sw_res = np.array(sorted({ridx[r] for w, rt in zip(t_weight, t_res) if w is not None
                                       for r in rt
                                       if net.resources[r].discipline not in _SHARED}), dtype=_I)
        #: True when some transitions are random switches (weighted; see Transition.weight)
        self.weighted = bool((self.sw_w > 0).sum() >= 2)

        # no randomness at all: every duration and every multiplier is one fixed value (a markov
        # modulator whose slow factor is 1 multiplies by 1 in both states) and no two transitions
        # are weighted, so every replication plays the same trajectory whatever its seed (the
        # kernel draws random numbers for durations, modulators and random switches only; other
        # ties are broken by the static scan order)
        fixed = deterministic_rows(self.d_code, self.d_par, self.d_pool)
        self.deterministic = not self.weighted and bool(fixed[:nT].all()) and all(
            (m.kind == "iid" and bool(fixed[nT + mi])) or (m.kind == "markov" and m.slow_factor == 1.0)
            for mi, m in enumerate(Ms))

        # random streams (sgdnet.engine.rng): one per transition, per modulator and one for the
        # random switches, named so that nets sharing names share draws (common random numbers);
        # a net without randomness draws nothing that matters, and skips hashing its names
        n_streams = nT + len(Ms) + 1
        if self.deterministic:
            self.sid = np.zeros(n_streams, dtype=np.uint64)
        else:
            self.sid = net_stream_ids(t_names, self.modulator_names)

        # every array contiguous and read-only (the kernel takes them in the order of
        # sgdnet.engine.abi.NET_ARGS)
        for f, a in list(vars(self).items()):
            if isinstance(a, np.ndarray):
                a = np.ascontiguousarray(a)
                a.setflags(write=False)
                setattr(self, f, a)
        if self.key is None:
            self.key = content_key(self)

    # ----------------------------------------------------------------- sizes
    @property
    def n_places(self) -> int:
        return len(self.place_names)

    @property
    def n_transitions(self) -> int:
        return len(self.transition_names)

    @property
    def n_resources(self) -> int:
        return len(self.resource_names)

    @property
    def n_members(self) -> int:
        return int(self.mem_gate.size)

    def __repr__(self) -> str:
        return (f"CompiledNet({self.name!r}: {self.n_places} places, {self.n_transitions} transitions, "
                f"{self.n_resources} resources, {len(self.gate_names)} gates, {len(self.modulator_names)} modulators)")


def content_key(cn: CompiledNet) -> str:
    """A SHA-1 of everything ``cn`` holds: its arrays (field, dtype, shape, bytes) and its plain
    fields (names, tags, kinds), all but ``key`` and fields set later (``_*``).

    Two compiled nets with one content key are interchangeable: the kernel, the fast paths and
    the results read nothing else (the reference oracle reads the :class:`Net`). Hashing the
    compiled form costs a fraction of compiling it (~0.02 s for the 20,651-transition fine
    sync-PS net of ResNet-50 on 32 workers, which compiles in ~0.05 s), where hashing the
    :class:`Net` (:func:`structural_key`) costs 3-4x.
    """
    h = hashlib.sha1()
    plain = []
    for f, v in vars(cn).items():
        if f == "key" or f.startswith("_"):
            continue
        if isinstance(v, np.ndarray):
            h.update(f"{f}:{v.dtype.str}:{v.shape}".encode())
            h.update(np.ascontiguousarray(v).data)
        else:
            plain.append((f, v))
    try:  # marshal version 2: no back-references, so equal values give equal bytes
        h.update(marshal.dumps(plain, 2))
    except ValueError:  # a tag value marshal does not know (numpy scalar, object...)
        h.update(repr(plain).encode())
    return h.hexdigest()


def _int_tag(v) -> int:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0:
        return int(v)
    return -1


def _unit():
    from ..dists import Deterministic

    return Deterministic(1.0)


_CACHE: OrderedDict[str, CompiledNet] = OrderedDict()  # content key -> compiled net
_CACHE_SIZE = 64
_BY_NET: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Net -> (stamp, compiled)
#: Nets with more places and transitions than this are neither hashed nor kept among the shared
#: ones (64 of them would hold gigabytes; such a net is rarely built twice alike): only the net
#: itself, unchanged, reuses its compiled form.
HASH_MAX_ELEMENTS = 100_000


def compile_net(net: Net | CompiledNet, *, share: bool = True) -> CompiledNet:
    """Validate and flatten ``net`` for the engine (cached by content).

    Parameters
    ----------
    net : Net or CompiledNet
        A CompiledNet is returned as is.
    share : bool
        Look the compiled form up, by its :func:`content_key`, among the nets compiled
        before, return that one when it is there (with what its runs learned: the kernel's
        room, the fast paths' analyses) and keep it otherwise. ``False`` skips the hash (~30 %
        of a compile), for a net its caller builds once and keeps (a study's re-rating
        template, :mod:`sgdnet.study.rerate`; :mod:`sgdnet.netcache`, which has the key of
        the net's inputs): the compiled form is then reused for this very net only.

    Returns
    -------
    CompiledNet
        The same object for the same (unchanged) net structure.

    Raises
    ------
    NetError
        When the net is structurally invalid (every problem is listed).
    """
    if isinstance(net, CompiledNet):
        return net
    if not isinstance(net, Net):
        raise NetError(f"compile_net needs a sgdnet.Net, got {type(net).__name__} {net!r:.80}")
    stamp = net.edit_stamp()
    cached = _BY_NET.get(net)
    if cached is not None and cached[0] == stamp:  # this very net, unchanged since
        return cached[1]
    if not share or len(net.transitions) + len(net.places) > HASH_MAX_ELEMENTS:
        # not shared: only this net, unchanged, gets it back
        with paused_gc():
            cn = CompiledNet(net, f"unhashed:{id(net):x}:{stamp}")
        _remember(net, stamp, cn)
        return cn
    with paused_gc():
        cn = CompiledNet(net)  # keyed by its content: cheaper than hashing the net first
    kept = _CACHE.get(cn.key)
    if kept is None:
        _CACHE[cn.key] = cn
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:  # the one compiled before: it keeps what runs learned (room, fast-path analyses)
        _CACHE.move_to_end(cn.key)
        cn = kept
    _remember(net, stamp, cn)
    return cn


def _remember(net: Net, stamp, cn: CompiledNet) -> None:
    try:
        _BY_NET[net] = (stamp, cn)
    except TypeError:  # pragma: no cover - a Net subclass that cannot be weakly referenced
        pass


#: the compiled cap of a transfer crossing a link of an ACK path when it has none of its own
#: (finite: the kernel's fast path takes no capped flow; no link is as fast)
ACK_MARK = 1e300


def _ack_arrays(Rs: list, ridx: dict) -> tuple[np.ndarray, np.ndarray]:
    """The links' ACK paths as one int array and one float array, both empty when no link has
    one; the compiled net appends them to ``re_ptr`` and ``re_val`` (the kernel:
    :func:`sgdnet.engine.kernel.flows.ack_cap`). The ints, for ``R`` resources: ``[0, R)``
    each link's ACK link or -1; ``[R, 2R+1)`` the pointers of its caps among the floats (by
    the ACK link's flow count, the last beyond; shifted past the efficiencies when appended);
    ``[2R+1, 3R+2)`` the pointers, after ``3R+2``, of the links whose caps each link's flow
    count sets (its dependents: re-allocated with it)."""
    nR = len(Rs)
    if all(r.ack_path is None for r in Rs):
        return np.zeros(0, dtype=_I), np.zeros(0, dtype=_F)
    via = [-1 if r.ack_path is None else ridx[r.ack_path[0]] for r in Rs]
    caps = [[] if r.ack_path is None else [float(c) for c in r.ack_path[1]] for r in Rs]
    deps: list[list[int]] = [[] for _ in Rs]
    for i, a in enumerate(via):
        if a >= 0:
            deps[a].append(i)
    cptr = np.zeros(nR + 1, dtype=_I)
    cptr[1:] = np.cumsum([len(c) for c in caps])
    dptr = np.zeros(nR + 1, dtype=_I)
    dptr[1:] = np.cumsum([len(d) for d in deps])
    ak_i = np.concatenate([np.array(via, dtype=_I), cptr, dptr,
                           np.array([i for d in deps for i in d], dtype=_I)])
    return ak_i, np.array([c for lst in caps for c in lst], dtype=_F)
