"""Exact cycle time of deterministic timed event graphs (max-plus algebra).

A timed event graph (every place with exactly one producer and one consumer, weights 1, no
resources, inhibitors, gates or modulators) with deterministic durations is a max-plus linear
system. Writing ``x_u(k)`` for the start of the k-th firing of ``u``, holding semantics give,
for a place from ``t`` to ``u`` with ``m`` initial tokens,

    x_u(k) >= x_t(k - m) + d_t,

and a transition with ``servers = s`` (finite) also satisfies ``x_t(k) >= x_t(k - s) + d_t``
(its ``k``-th firing waits for the ``(k-s)``-th to complete: a self-loop with ``s`` tokens, so
its own circuit has mean ``d_t / s``; ``servers = inf`` adds no self-loop). Every transition
then fires, asymptotically, once per

    lambda = max over circuits C of (sum of delays on C) / (sum of tokens on C)

seconds, where only circuits *upstream* of a transition limit it (event graphs have no
back-pressure without a return path). :func:`cycle_time` computes lambda, the per-transition
rates and a critical circuit by Howard's policy iteration (default) or Karp's algorithm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import AnalysisError
from ..net.builder import Net
from ..net.graph import event_graph_arcs

__all__ = ["CycleTime", "cycle_time", "max_cycle_ratio", "METHODS"]

METHODS = ("howard", "karp")

#: Karp's algorithm stores (expanded nodes)^2 values; beyond this use Howard
KARP_MAX_NODES = 5000


@dataclass(frozen=True)
class CycleTime:
    """The asymptotic behaviour of a timed event graph.

    Attributes
    ----------
    cycle_time : float
        ``lambda``, seconds: the largest cycle mean (total duration / total tokens) of the net;
        the period of every transition of its slowest strongly connected part.
    throughput : float
        ``1 / lambda``: firings per second of every transition of a strongly connected net (of
        those downstream of the critical circuit otherwise; see ``rates``).
    critical_circuit : list of str
        Transition names of a circuit whose mean is ``lambda``, in firing order (each feeds the
        next, the last feeds the first). ``[t]`` is ``t``'s own servers self-loop or a place
        from ``t`` to itself.
    method : str
        ``"howard"`` or ``"karp"``.
    rates : dict of str to float
        Firings per second of each transition: ``1 / max`` cycle mean over the circuits
        upstream of it (``inf`` if every such circuit has zero duration).
    steps_per_s : float or None
        Sum of ``rates`` over transitions tagged ``step=True`` — the quantity
        :attr:`sgdnet.results.Result.throughput` estimates; ``None`` without step transitions.
    critical_places : list of (str or None)
        For each arc of ``critical_circuit`` (from element ``i`` to ``i + 1``, cyclically), the
        place it goes through, or ``None`` for the implicit servers self-loop.
    critical_tokens : int
        Total tokens on the critical circuit.
    approximate : bool
        True when computed with ``use_means=True`` on stochastic durations: then
        ``cycle_time`` is the max-plus value of the mean durations, a *lower bound* on the mean
        stochastic cycle time (the true throughput is at most ``throughput``; see
        :func:`cycle_time`), not the stochastic answer.
    """

    cycle_time: float
    throughput: float
    critical_circuit: list[str]
    method: str
    rates: dict[str, float] = field(default_factory=dict)
    steps_per_s: float | None = None
    critical_places: list[str | None] = field(default_factory=list)
    critical_tokens: int = 0
    approximate: bool = False

    def __repr__(self) -> str:
        circ = " -> ".join(self.critical_circuit)
        return (
            f"CycleTime({self.cycle_time:.6g} s, {self.throughput:.6g} firings/s, "
            f"critical: {circ} ({self.critical_tokens} tokens), method={self.method!r}"
            + (", approximate" if self.approximate else "") + ")"
        )


# ------------------------------------------------------------------------- graph prep
@dataclass
class _Graph:
    names: list[str]
    src: np.ndarray  # int64 (m,)
    dst: np.ndarray
    w: np.ndarray  # float64
    tau: np.ndarray  # int64
    label: list[str | None]  # place name or None (servers self-loop)


def _reduce_parallel(names, arcs) -> _Graph:
    """Keep one arc per (src, dst): the one with the fewest tokens (all share the delay d_src)."""
    index = {n: i for i, n in enumerate(names)}
    best: dict[tuple[int, int], tuple[float, int, str | None]] = {}
    for a in arcs:
        key = (index[a.src], index[a.dst])
        cur = best.get(key)
        if cur is None or a.tokens < cur[1]:
            best[key] = (a.delay, a.tokens, a.place)
    keys = list(best)
    src = np.array([k[0] for k in keys], dtype=np.int64)
    dst = np.array([k[1] for k in keys], dtype=np.int64)
    w = np.array([best[k][0] for k in keys], dtype=np.float64)
    tau = np.array([best[k][1] for k in keys], dtype=np.int64)
    return _Graph(list(names), src, dst, w, tau, [best[k][2] for k in keys])


def _zero_token_circuit(n: int, src, dst, tau) -> list[int] | None:
    """A circuit of arcs without tokens (in arc order), or None (Kahn's algorithm)."""
    zmask = tau == 0
    zs, zd = src[zmask].tolist(), dst[zmask].tolist()
    indeg = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for s, d in zip(zs, zd):
        indeg[d] += 1
        out[s].append(d)
    stack = [v for v in range(n) if indeg[v] == 0]
    seen = 0
    while stack:
        v = stack.pop()
        seen += 1
        for d in out[v]:
            indeg[d] -= 1
            if indeg[d] == 0:
                stack.append(d)
    if seen == n:
        return None
    # every remaining node has a remaining zero-token predecessor: walk back until a repeat
    pred = {}
    for s, d in zip(zs, zd):
        if indeg[s] > 0 and indeg[d] > 0:
            pred.setdefault(d, s)
    v = next(iter(pred))
    order: dict[int, int] = {}
    walk = []
    while v not in order:
        order[v] = len(walk)
        walk.append(v)
        v = pred[v]
    cyc = walk[order[v]:]
    return cyc[::-1]  # walked backwards along arcs


def _rotate(circ: list[int]) -> list[int]:
    k = circ.index(min(circ))
    return circ[k:] + circ[:k]


# ------------------------------------------------------------------------------ Howard
_JIT: dict[str, object] = {}


def _compiled_value_determination():
    """:func:`_value_determination` compiled by numba (``cache=True``), on first use: importing
    this module (``sgdnet.analysis``, which :mod:`sgdnet.prediction` reads its statistics from)
    does not import numba."""
    fn = _JIT.get("value_determination")
    if fn is None:
        from numba import njit

        fn = _JIT["value_determination"] = njit(cache=True)(_value_determination)
    return fn


def _value_determination(pred, aw, at, x_old):  # pragma: no cover - compiled
    """Cycle ratio ``eta`` and potentials ``x`` of a policy (node -> predecessor ``pred`` via an
    arc of weight ``aw`` and ``at`` tokens): on each policy circuit ``eta`` is its ratio and its
    entry node keeps its previous potential; elsewhere ``x_u = x_pred + aw - eta * at``.
    Returns (eta, x, entry nodes of the policy circuits)."""
    n = pred.size
    eta = np.zeros(n)
    x = x_old.copy()
    state = np.zeros(n, np.int8)
    path = np.empty(n, np.int64)
    roots = np.empty(n, np.int64)
    nroots = 0
    for s0 in range(n):
        if state[s0] != 0:
            continue
        length = 0
        v = s0
        while state[v] == 0:
            state[v] = 1
            path[length] = v
            length += 1
            v = pred[v]
        if state[v] == 1:  # a new policy circuit, entered at v
            W = aw[v]
            T = at[v]
            u = pred[v]
            while u != v:
                W += aw[u]
                T += at[u]
                u = pred[u]
            e = W / T
            eta[v] = e
            state[v] = 2
            roots[nroots] = v
            nroots += 1
        for i in range(length - 1, -1, -1):
            u = path[i]
            if state[u] == 2:
                continue
            p = pred[u]
            eta[u] = eta[p]
            x[u] = x[p] + aw[u] - eta[u] * at[u]
            state[u] = 2
    return eta, x, roots[:nroots]


def _howard(g: _Graph, n: int):
    """Howard policy iteration for the max cycle ratio, each node choosing an in-arc.

    Returns (eta per node, critical circuit as node list in arc order, its arc indices).
    ``eta[v]`` = max cycle ratio over the circuits upstream of ``v``.
    """
    m = g.src.size
    order = np.argsort(g.dst, kind="stable")
    src, dst, w, tau = g.src[order], g.dst[order], g.w[order], g.tau[order]
    starts = np.searchsorted(dst, np.arange(n))
    counts = np.diff(np.append(starts, m))
    if np.any(counts == 0):  # pragma: no cover - validation guarantees an input place
        v = int(np.flatnonzero(counts == 0)[0])
        raise AnalysisError(f"transition {g.names[v]!r} has no input place")
    scale = float(np.max(np.abs(w))) if m else 0.0
    tol_eta = 1e-12 * scale
    tol_x = 1e-13 * scale * max(1.0, float(n)) + 1e-12 * scale

    def first_argmax(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gmax = np.maximum.reduceat(values, starts)
        hit = np.flatnonzero(values >= gmax[dst])
        _, first = np.unique(dst[hit], return_index=True)
        return gmax, hit[first]  # arc (sorted index) per node, nodes 0..n-1 in order

    _, pi = first_argmax(w)  # initial policy: heaviest in-arc
    x = np.zeros(n)
    eta = np.zeros(n)
    roots = np.empty(0, np.int64)
    for _it in range(10 * n + 1000):
        # --- value determination on the policy graph (each node -> its chosen predecessor)
        eta, x, roots = _compiled_value_determination()(src[pi], w[pi], tau[pi], x)
        # --- policy improvement: first on the cycle ratio, then on the potentials
        e_src = eta[src]
        gmax, arg = first_argmax(e_src)
        better = gmax > eta + tol_eta
        if better.any():
            pi = np.where(better, arg, pi)
            continue
        ok = e_src >= eta[dst] - tol_eta
        val = np.where(ok, x[src] + w - eta[dst] * tau, -np.inf)
        gmax, arg = first_argmax(val)
        better = gmax > x + tol_x
        if better.any():
            pi = np.where(better, arg, pi)
            continue
        break
    else:  # pragma: no cover - Howard converges in a handful of iterations in practice
        raise AnalysisError("Howard's policy iteration did not converge; retry with method='karp'")
    root = int(roots[np.argmax(eta[roots])])
    pred = src[pi]
    cyc = [root]
    v = int(pred[root])
    while v != root:
        cyc.append(v)
        v = int(pred[v])
    # policy circuits are found along predecessor links: reverse into arc order
    nodes = cyc[:1] + cyc[1:][::-1]
    nodes = _rotate(nodes)
    arcs = [int(order[pi[nodes[(i + 1) % len(nodes)]]]) for i in range(len(nodes))]
    return eta, nodes, arcs


# -------------------------------------------------------------------------------- Karp
def _karp_scc(nodes: list[int], g: _Graph, arc_ids: list[int]):
    """Karp's maximum cycle mean on one strongly connected component, tokens as lengths.

    Arcs with ``k >= 2`` tokens are expanded into chains of ``k`` one-token arcs; zero-token
    arcs (acyclic here) are absorbed by a longest-path pass inside each layer, so layer ``k``
    holds the heaviest walks carrying exactly ``k`` tokens. Returns (lambda, circuit as global
    node list in arc order).
    """
    local = {v: i for i, v in enumerate(nodes)}
    n0 = len(nodes)
    one_s, one_d, one_w = [], [], []
    zero_s, zero_d, zero_w = [], [], []
    nxt = n0
    for a in arc_ids:
        s, d, w, k = local[int(g.src[a])], local[int(g.dst[a])], float(g.w[a]), int(g.tau[a])
        if k == 0:
            zero_s.append(s)
            zero_d.append(d)
            zero_w.append(w)
            continue
        prev, wt = s, w
        for _ in range(k - 1):
            one_s.append(prev)
            one_d.append(nxt)
            one_w.append(wt)
            prev, wt = nxt, 0.0
            nxt += 1
        one_s.append(prev)
        one_d.append(d)
        one_w.append(wt)
    N = nxt
    if N > KARP_MAX_NODES:
        raise AnalysisError(
            f"method='karp' would expand a component into {N} nodes (limit {KARP_MAX_NODES}; it "
            "costs O(nodes x arcs) time and nodes^2 memory); use method='howard'"
        )
    o_s, o_d, o_w = np.array(one_s, int), np.array(one_d, int), np.array(one_w, float)
    # topological levels of the zero-token DAG (original nodes only)
    indeg = [0] * N
    for d in zero_d:
        indeg[d] += 1
    level = [0] * N
    outs: list[list[int]] = [[] for _ in range(N)]
    for i, s in enumerate(zero_s):
        outs[s].append(i)
    stack = [v for v in range(N) if indeg[v] == 0]
    while stack:
        v = stack.pop()
        for i in outs[v]:
            d = zero_d[i]
            level[d] = max(level[d], level[v] + 1)
            indeg[d] -= 1
            if indeg[d] == 0:
                stack.append(d)
    z_s, z_d, z_w = np.array(zero_s, int), np.array(zero_d, int), np.array(zero_w, float)
    z_lvl = np.array([level[d] for d in zero_d], int)
    groups = [np.flatnonzero(z_lvl == lv) for lv in range(1, int(z_lvl.max(initial=0)) + 1)]

    E = np.full((N + 1, N), -np.inf)
    E[0] = 0.0
    # predecessor of state (k, v): >= 0 one-token arc index (from layer k-1), < 0: -1 - zero arc
    P = np.full((N + 1, N), np.iinfo(np.int64).min, dtype=np.int64)
    for k in range(1, N + 1):
        row = E[k]
        cand = E[k - 1][o_s] + o_w
        np.maximum.at(row, o_d, cand)
        hit = np.flatnonzero((cand == row[o_d]) & np.isfinite(cand))
        P[k][o_d[hit]] = hit
        for grp in groups:
            c = row[z_s[grp]] + z_w[grp]
            cur = row.copy()
            np.maximum.at(row, z_d[grp], c)
            imp = grp[(c == row[z_d[grp]]) & (c > cur[z_d[grp]])]
            P[k][z_d[imp]] = -1 - imp
    EN = E[N]
    with np.errstate(invalid="ignore"):
        ratios = (EN[None, :] - E[:N]) / (N - np.arange(N))[:, None]
    ratios = np.where(np.isfinite(E[:N]), ratios, np.inf)
    per_node = np.where(np.isfinite(EN), ratios.min(axis=0), -np.inf)
    vstar = int(np.argmax(per_node))
    lam = float(per_node[vstar])
    # --- a critical circuit from the optimal N-token walk to vstar (any of its cycles is one)
    layer_end = [0] * (N + 1)
    walk = []  # expanded nodes, backwards
    k, v = N, vstar
    layer_end[N] = v
    walk.append((k, v))
    while k > 0:
        p = int(P[k][v])
        if p < 0:
            v = int(z_s[-1 - p])
        else:
            v = int(o_s[p])
            k -= 1
            layer_end[k] = v
        walk.append((k, v))
    walk.reverse()
    seen: dict[int, int] = {}
    for kk in range(N + 1):
        if layer_end[kk] in seen:
            i, j = seen[layer_end[kk]], kk
            break
        seen[layer_end[kk]] = kk
    else:  # pragma: no cover - pigeonhole: N + 1 layer ends over N nodes
        raise AnalysisError("Karp reconstruction failed")
    # segment of the walk from the end of layer i to the end of layer j
    pos = [idx for idx, (kk, _) in enumerate(walk)]
    start = max(idx for idx in pos if walk[idx][0] == i)
    stop = max(idx for idx in pos if walk[idx][0] == j)
    seg = [vv for _, vv in walk[start:stop + 1]]
    where: dict[int, int] = {}
    cyc: list[int] = []
    for r, vv in enumerate(seg):
        if vv in where:
            cyc = seg[where[vv]:r]
            break
        where[vv] = r
    circ = [nodes[vv] for vv in cyc if vv < n0]
    return lam, circ


def _karp(g: _Graph, n: int):
    import networkx as nx

    dg = nx.DiGraph()
    dg.add_nodes_from(range(n))
    dg.add_edges_from(zip(g.src.tolist(), g.dst.tolist()))
    cond = nx.condensation(dg)
    member = cond.graph["mapping"]
    arcs_of: dict[int, list[int]] = {c: [] for c in cond.nodes}
    for a in range(g.src.size):
        cs, cd = member[int(g.src[a])], member[int(g.dst[a])]
        if cs == cd:
            arcs_of[cs].append(a)
    own: dict[int, float] = {}
    circ_of: dict[int, list[int]] = {}
    for c in cond.nodes:
        if arcs_of[c]:
            lam, circ = _karp_scc(sorted(cond.nodes[c]["members"]), g, arcs_of[c])
            own[c] = lam
            circ_of[c] = circ
    eta_c: dict[int, float] = {}
    for c in nx.topological_sort(cond):
        e = own.get(c, -math.inf)
        for p in cond.predecessors(c):
            e = max(e, eta_c[p])
        eta_c[c] = e
    eta = np.array([eta_c[member[v]] for v in range(n)])
    best = max(own, key=lambda c: own[c])
    nodes = _rotate(circ_of[best])
    # arc indices along the circuit
    lookup = {(int(s), int(d)): a for a, (s, d) in enumerate(zip(g.src, g.dst))}
    arcs = [lookup[(nodes[i], nodes[(i + 1) % len(nodes)])] for i in range(len(nodes))]
    return eta, nodes, arcs


# ----------------------------------------------------------------------------- public
def max_cycle_ratio(names, arcs, method: str = "howard"):
    """Maximum cycle ratio of a weighted graph with token counts (the engine of
    :func:`cycle_time`, usable on any graph).

    Parameters
    ----------
    names : list of str
        Node names.
    arcs : iterable of (src, dst, delay, tokens[, label])
        Arcs by node name; ``tokens`` integers >= 0, ``delay`` finite. Every node needs an
        incoming arc, and no circuit may be token-free.
    method : {"howard", "karp"}

    Returns
    -------
    (eta, circuit, arc_labels, tokens) : (dict, list of str, list, int)
        ``eta[name]`` = max ratio over the circuits upstream of ``name``; a circuit achieving
        the overall maximum (names in arc order), the labels of its arcs and its total tokens.

    Raises
    ------
    AnalysisError
        On a token-free circuit (names it), a node without incoming arc, or an unknown method.
    """
    from ..net.graph import EventArc

    if method not in METHODS:
        raise AnalysisError(f"method={method!r} is unknown; use one of {list(METHODS)}")
    names = list(names)
    ea = [EventArc(a[0], a[1], float(a[2]), int(a[3]), a[4] if len(a) > 4 else None) for a in arcs]
    g = _reduce_parallel(names, ea)
    return _solve(g, method)


def _solve(g: _Graph, method: str):
    n = len(g.names)
    if g.src.size == 0:
        raise AnalysisError("the event graph has no arcs, hence no circuit: its throughput is unbounded")
    has_in = np.zeros(n, bool)
    has_in[g.dst] = True
    if not has_in.all():
        v = g.names[int(np.flatnonzero(~has_in)[0])]
        raise AnalysisError(f"transition {v!r} has no input arc, so nothing bounds its firing rate")
    zc = _zero_token_circuit(n, g.src, g.dst, g.tau)
    if zc is not None:
        zc = _rotate(zc)
        names = [g.names[v] for v in zc]
        raise AnalysisError(
            f"the circuit {' -> '.join(names + names[:1])} carries no token, so its transitions "
            "can never fire (the net deadlocks); put an initial token on one of its places"
        )
    if method == "howard":
        eta, nodes, arcs = _howard(g, n)
    else:
        eta, nodes, arcs = _karp(g, n)
    return ({g.names[v]: float(eta[v]) for v in range(n)}, [g.names[v] for v in nodes],
            [g.label[a] for a in arcs], int(sum(int(g.tau[a]) for a in arcs)))


def cycle_time(net: Net, method: str = "howard", use_means: bool = False) -> CycleTime:
    """Exact cycle time and throughput of a deterministic timed event graph.

    Parameters
    ----------
    net : Net
        A timed event graph (:meth:`Net.is_event_graph`): every place with exactly one producer
        and one consumer, arc weights 1, no resources, inhibitors, gates or modulators.
    method : {"howard", "karp"}, optional
        ``"howard"`` (default): Howard's policy iteration for the maximum cycle ratio
        (Cochet-Terrasson, Cohen, Gaubert et al.), a handful of O(arcs) iterations, suited to
        nets of 10^4+ transitions. ``"karp"``: Karp's theorem on the graph with multi-token arcs
        expanded into chains, per strongly connected component, O(nodes x arcs) — an
        independent cross-check for small and medium nets.
    use_means : bool, optional
        Replace each stochastic duration by its mean. The result is then *not* the stochastic
        throughput but an approximation: with independent durations and ``servers`` 1 or inf,
        Jensen's inequality on the max-plus recursion makes the mean cycle time of the
        stochastic net at least this ``cycle_time`` (a lower bound; ``throughput`` an upper
        bound), equal only when durations are deterministic. With ``servers = k > 1`` random
        durations let firings overtake each other and the k-token self-loop is itself an
        approximation.

    Returns
    -------
    CycleTime
        ``cycle_time`` (lambda, seconds), ``throughput`` (1 / lambda, firings/s),
        ``critical_circuit``, ``method``, per-transition ``rates``, ``steps_per_s`` and more.

    Raises
    ------
    NetError
        If the net is structurally invalid.
    NotEventGraphError
        If it is not an event graph (the message names the offending place, arc, resource,
        inhibitor, gate or modulator).
    AnalysisError
        If a duration is not deterministic (and ``use_means`` is False), a circuit carries no
        token (the net deadlocks; the circuit is named), every circuit has zero duration
        (unbounded throughput), or ``method`` is unknown.

    Notes
    -----
    Semantics (holding durations, as in the engine): a place from ``t`` to ``u`` with ``m``
    tokens is an arc ``t -> u`` of delay ``d_t`` and ``m`` tokens; a transition with finite
    ``servers = s`` gets a self-loop of delay ``d_t`` and ``s`` tokens (with ``s = 1`` it
    cannot overlap itself; ``s > 1`` lets ``s`` firings overlap, circuit mean ``d_t / s``);
    ``servers = inf`` gets none. Parallel places between the same pair keep the fewest tokens.

    Examples
    --------
    >>> from sgdnet.net import Net
    >>> net = Net("ring")
    >>> for i in range(3):
    ...     _ = net.place(f"p{i}", tokens=1 if i == 0 else 0)
    >>> for i, d in enumerate([1.0, 2.0, 0.5]):
    ...     _ = net.transition(f"t{i}", d, inputs=[f"p{i}"], outputs=[f"p{(i + 1) % 3}"])
    >>> ct = cycle_time(net)
    >>> ct.cycle_time, ct.critical_circuit
    (3.5, ['t0', 't1', 't2'])
    """
    if method not in METHODS:
        raise AnalysisError(f"method={method!r} is unknown; use one of {list(METHODS)}")
    arcs = event_graph_arcs(net)
    if not use_means:
        random = [t.name for t in net.transitions.values() if t.duration.var != 0]
        if random:
            shown = ", ".join(
                f"{n!r} ({net.transitions[n].duration!r})" for n in random[:5]
            ) + (f" and {len(random) - 5} more" if len(random) > 5 else "")
            raise AnalysisError(
                f"cycle_time requires Deterministic durations; transitions {shown} are random. "
                "Use cycle_time(net, use_means=True) for the max-plus value of the means (a lower "
                "bound on the mean cycle time, not the stochastic throughput), or simulate"
            )
    approximate = use_means and any(t.duration.var != 0 for t in net.transitions.values())
    names = list(net.transitions)
    g = _reduce_parallel(names, arcs)
    eta, circuit, labels, tokens = _solve(g, method)
    lam = max(eta.values())
    if not lam > 0:
        raise AnalysisError(
            f"every circuit of net {net.name!r} has zero total duration, so its throughput is "
            "unbounded; give some transition on each circuit a positive duration"
        )
    rates = {k: (1.0 / e if e > 0 else math.inf) for k, e in eta.items()}
    steps = net.step_transitions()
    return CycleTime(
        cycle_time=float(lam),
        throughput=1.0 / float(lam),
        critical_circuit=circuit,
        method=method,
        rates=rates,
        steps_per_s=float(sum(rates[s] for s in steps)) if steps else None,
        critical_places=labels,
        critical_tokens=tokens,
        approximate=approximate,
    )
