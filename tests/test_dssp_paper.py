"""DSSP against an independent event simulation of the paper's server rule (issue #16).

The simulation below is written here from the paper's description (Zhao et al., 2019: the
server's push handler and its synchronization controller), in plain Python with a heap of
events; it shares no code with sgdnet. The cluster: 2 fast and 2 slow workers (speeds 1, 1,
0.4, 0.4), Gamma compute times, a push and a pull that each take the one-way latency ``D``
(zero-byte messages, free server updates), so a worker's push reaches the server ``D`` after its
compute ends and its next compute starts ``D`` after the server's OK.

The server, on a push from worker ``p`` (its count incremented, its push time recorded):

1. ``p`` has allowance left: use one, OK;
2. ``p`` is within ``S_L`` pushes of the slowest: OK;
3. ``p`` is the fastest (largest count): the controller extrapolates the fastest's next pushes
   ``t_f + r I_f`` (``r = 0..r_max``) and the slowest's ``t_s + k I_s`` (``k = 1..r_max``) from
   their last push intervals and takes the smallest ``r`` with the least gap to any of the
   slowest's; ``p`` gets an OK and ``r*`` allowance (``r* + 1`` OKs);
4. else ``p`` waits for an OK until it is within ``S_L`` of the slowest;

and, with a cap ``S_U``, no OK is sent while ``p`` is more than ``S_U`` pushes ahead.

Compared (fixed seeds): the per-replication shares of the decisions by ``r*`` and of the pushes
by lead (the pusher's count minus the least count, at its arrival), bin by bin, Welch t-tests at
alpha = 1e-3 Bonferroni-divided over the bins. The same test rejects the rule sgdnet had before
(only the slowest's next push as target, ``r*`` OKs), so it can fail.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest
from scipy import stats

from sgdnet import Cluster, Layer, ModelProfile, simulate, variants

SPEEDS = (1.0, 1.0, 0.4, 0.4)
MEAN, CV, D = 0.03, 0.3, 0.001
S_L, R_MAX = 3, 12
STEPS, WARMUP = 1800, 200  # step completions per replication (all workers)
REPS = 24
PROF = ModelProfile("one", [Layer("all", 0.0, MEAN, 0.0)], batch_size=32)
CLUSTER = Cluster(workers=4, speeds=list(SPEEDS), compute_cv=CV, latency=D, update_s_per_layer=0,
                  update_s_per_byte=0)


def paper_server(rng, s_upper, n_steps, rule="paper"):
    """One run of the paper's server; returns (r* decisions, leads at push arrivals)."""
    n = len(SPEEDS)
    shape = 1.0 / CV**2
    count, last, prev = [0] * n, [0.0] * n, [0.0] * n
    allowance, ok, waiting = [0] * n, [False] * n, [False] * n
    decisions, leads = [], []
    heap, seq = [], [0]

    def push_event(t, kind, i):
        seq[0] += 1
        heapq.heappush(heap, (t, seq[0], kind, i))

    def start(i, t):
        push_event(t + rng.gamma(shape, MEAN / SPEEDS[i] / shape), "end", i)

    def controller(p, now):
        s = count.index(min(count))
        i_f, i_s = last[p] - prev[p], last[s] - prev[s]
        if rule == "paper":
            def gap(r):
                return min((abs(now + r * i_f - (last[s] + k * i_s)) for k in range(1, R_MAX + 1)),
                           default=math.inf)
        else:  # sgdnet before #16: only the slowest's next push
            def gap(r):
                return abs(now + r * i_f - (last[s] + i_s))
        return min(range(R_MAX + 1), key=lambda r: (gap(r), r))

    for i in range(n):
        start(i, 0.0)
    done = 0
    while heap:
        t, _, kind, p = heapq.heappop(heap)
        if kind == "end":
            done += 1
            if done == n_steps:
                break
            push_event(t + D, "arrive", p)
            continue
        count[p] += 1
        prev[p], last[p] = last[p], t
        lead = count[p] - min(count)
        leads.append(lead)
        waiting[p] = True
        if allowance[p] > 0:
            allowance[p] -= 1
            ok[p] = True
        elif lead <= S_L:
            ok[p] = True
        elif count[p] == max(count):
            r = controller(p, t)
            decisions.append(r)
            if rule == "paper":
                ok[p], allowance[p] = True, r
            elif r > 0:
                ok[p], allowance[p] = True, r - 1
        for j in range(n):  # OKs due now: this push, and waiting workers it brought within S_L
            lj = count[j] - min(count)
            if waiting[j] and (ok[j] or lj <= S_L) and (s_upper is None or lj <= s_upper):
                waiting[j], ok[j] = False, False
                start(j, t + D)  # the pull, then the next compute
    return np.array(decisions, dtype=int), np.array(leads, dtype=int)


def lead_bins(s_upper):
    """Lower edges of the lead bins compared: each lead up to S_U + 1 (the largest with a cap);
    without a cap each lead up to S_L + r_max, then one bin for S_L + r_max + 1 and more."""
    return list(range((s_upper if s_upper is not None else S_L + R_MAX) + 2))


def shares(values, edges):
    """Share of ``values`` in each bin ``[edges[j], edges[j + 1])`` (nan when there are none)."""
    if not values.size:
        return np.full(len(edges), np.nan)
    h = np.bincount(np.searchsorted(edges, values, side="right") - 1, minlength=len(edges))
    return h / h.sum()


def sgdnet_runs(s_upper):
    net = variants.build("dssp", PROF, CLUSTER, granularity="coarse", s_lower=S_L, r_max=R_MAX,
                         s_upper=s_upper)
    res = simulate(net, steps=STEPS, warmup=WARMUP, replications=REPS, seed=16)
    st = res.gate_stats("dssp")
    edges = lead_bins(s_upper)
    r_rows, l_rows = [], []
    for k in range(REPS):
        rc = np.zeros(R_MAX + 1)
        rc[:st.r_star_counts.shape[1]] = st.r_star_counts[k]
        r_rows.append(rc / rc.sum() if rc.sum() else np.full(R_MAX + 1, np.nan))
        lc = st.lead_counts[k]
        grouped = np.array([lc[e:min(nxt, lc.size)].sum() for e, nxt in zip(edges, edges[1:] + [10**9])],
                           dtype=float)
        l_rows.append(grouped / grouped.sum())
    return np.array(r_rows), np.array(l_rows), res


def paper_runs(s_upper, rule="paper"):
    edges = lead_bins(s_upper)
    r_rows, l_rows = [], []
    for k in range(REPS):
        dec, leads = paper_server(np.random.default_rng([16, k]), s_upper, STEPS + WARMUP, rule)
        r_rows.append(shares(dec, list(range(R_MAX + 1))))
        l_rows.append(shares(leads, edges))
    return np.array(r_rows), np.array(l_rows)


def disagreements(a, b, alpha=1e-3):
    """Bins whose per-replication shares differ (Welch, Bonferroni over the bins)."""
    bad = {}
    a, b = a[~np.isnan(a).any(axis=1)], b[~np.isnan(b).any(axis=1)]
    cols = a.shape[1]
    for j in range(cols):
        x, y = a[:, j], b[:, j]
        if x.std() == 0 and y.std() == 0:
            if x.mean() != y.mean():
                bad[j] = (x.mean(), y.mean(), 0.0)
            continue
        p = stats.ttest_ind(x, y, equal_var=False).pvalue
        if not p > alpha / cols:
            bad[j] = (round(float(x.mean()), 4), round(float(y.mean()), 4), float(p))
    return bad


@pytest.fixture(scope="module", params=[None, 8], ids=["uncapped", "s_upper=8"])
def runs(request):
    s_upper = request.param
    return s_upper, sgdnet_runs(s_upper), paper_runs(s_upper)


def test_r_star_distribution_matches_the_paper_rule(runs):
    _, (kr, _, _), (pr, _) = runs
    assert len(kr) == REPS and np.isfinite(kr).all() and np.isfinite(pr).all()
    assert not disagreements(kr, pr), disagreements(kr, pr)


def test_lead_distribution_matches_the_paper_rule(runs):
    _, (_, kl, _), (_, pl) = runs
    assert not disagreements(kl, pl), disagreements(kl, pl)


def test_the_comparison_rejects_the_former_one_sided_rule(runs):
    s_upper, (kr, kl, _), _ = runs
    old_r, old_l = paper_runs(s_upper, rule="one-sided")
    assert disagreements(kr, old_r)


def test_cap_bounds_the_lead_and_no_cap_does_not(runs):
    s_upper, (_, _, res), _ = runs
    st = res.gate_stats("dssp")
    top = int(np.nonzero(st.lead_counts.sum(axis=0))[0].max())
    if s_upper is not None:
        assert top == s_upper + 1  # released at S_U, it pushes once more
    else:
        assert top > S_L + R_MAX + 1
