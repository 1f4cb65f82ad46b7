"""The kernel's instant queue (``instant_push`` / ``instant_pop`` / ``instant_remove`` in
engine/kernel/candidates.py).

The candidates to examine at the current instant are kept in a sorted ring buffer that becomes a
binary heap when a long queue (``IQ_RING`` entries or more) receives an out-of-order newcomer. Two
kinds of checks:

- the structure alone, driven from Python against a sorted list: random pushes (in order, at
  the front, in the middle), removals anywhere and pops must always give the minimum key, with
  every entry's recorded position pointing back at it, through ring wrap-arounds, switches to
  the heap and back;
- whole runs: deterministic nets built so that many candidates of one instant arrive out of key
  order (bursts of 48 consumers enabled in a shuffled order, with mixed priorities, multi-server
  transitions whose old requests come back after newer ones, FIFO and priority resources whose
  queue heads are promoted with old request times, consumers competing for a few tokens so that
  queued candidates are withdrawn) must give exactly the reference engine's run
  (``sgdnet/engine/reference.py``, the independent oracle); one run, replayed by the plain-Python
  kernel (``NUMBA_DISABLE_JIT=1``), shows that these nets do reach every branch of the queue.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sgdnet import simulate
from sgdnet.dists import Deterministic
from sgdnet.engine import layout as K
from sgdnet.engine.kernel import candidates as C
from sgdnet.engine.reference import simulate_reference
from sgdnet.net import Net

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------ the structure alone
class _Queue:
    """The kernel's instant queue over ``n_trans`` transitions, with their keys in TS/TF."""

    def __init__(self, pcls, ktime, rank):
        nT = len(rank)
        self.TS = np.zeros((nT, K.N_TS), dtype=np.int64)
        self.TD = np.zeros((nT, K.N_TD), dtype=np.int64)
        self.TF = np.zeros((nT, K.N_TF), dtype=np.float64)
        self.TS[:, K.TS_PCLS] = pcls
        self.TS[:, K.TS_RANK] = rank
        self.TF[:, K.TF_KTIME] = ktime
        self.ih = np.zeros(nT, dtype=np.int64)
        self.ihs = np.zeros(nT, dtype=np.int64)
        self.n, self.hd, self.heap = np.int64(0), np.int64(0), False

    def push(self, t):
        self.n, self.hd, self.heap = C.instant_push(self.ih, self.ihs, self.hd, self.n, self.heap,
                                                np.int64(t), self.TD, self.TS, self.TF)

    def pop(self):
        t, self.n, self.hd, self.heap = C.instant_pop(self.ih, self.hd, self.n, self.heap, self.TD,
                                                  self.TS, self.TF)
        return int(t)

    def remove(self, t):
        self.n, self.hd, self.heap = C.instant_remove(self.ih, self.hd, self.n, self.heap, np.int64(t),
                                                  self.TD, self.TS, self.TF)

    def positions_ok(self, members):
        """Every member sits where TD_CPOS says (a ring index or a heap position)."""
        return all(self.ih[self.TD[t, K.TD_CPOS]] == t for t in members)


def _key(q, t):
    return (q.TS[t, K.TS_PCLS], q.TF[t, K.TF_KTIME], q.TS[t, K.TS_RANK])


@pytest.mark.parametrize("seed", range(6))
def test_queue_pops_the_minimum_through_ring_and_heap(seed):
    rng = np.random.default_rng(seed)
    nT = 120
    pcls = rng.integers(0, 3, nT)
    ktime = rng.integers(0, 6, nT).astype(float)  # many equal times: rank breaks the ties
    rank = rng.permutation(nT)
    q = _Queue(pcls, ktime, rank)
    inside: set[int] = set()
    modes = set()
    for _ in range(4000):
        out = [t for t in range(nT) if t not in inside]
        x = rng.random()
        if out and (x < 0.5 or not inside):
            if rng.random() < 0.6:  # mostly in key order, as in the kernel
                # the largest key inside, read once per push (not once per outside entry)
                top = max(_key(q, u) for u in inside) if inside else None
                big = [t for t in out if top is None or _key(q, t) > top]
                t = int(rng.choice(big)) if big else int(rng.choice(out))
            else:
                t = int(rng.choice(out))
            q.push(t)
            inside.add(t)
        elif x < 0.8:
            t = q.pop()
            assert _key(q, t) == min(_key(q, u) for u in inside)
            inside.remove(t)
        else:
            t = int(rng.choice(sorted(inside)))
            q.remove(t)
            inside.remove(t)
        assert q.n == len(inside)
        assert q.positions_ok(inside)
        modes.add(bool(q.heap))
    assert modes == {False, True}  # the queue went to the heap and came back
    order = [q.pop() for _ in range(len(inside))]
    assert order == sorted(inside, key=lambda t: _key(q, t))


def test_short_queue_stays_a_ring_long_out_of_order_one_is_a_heap():
    ring = C.IQ_RING
    nT = 2 * ring + 2
    q = _Queue(np.zeros(nT, dtype=np.int64), np.zeros(nT), np.arange(nT))
    # short and out of order: moved into place in the ring
    for t in (5, 9, 7, 6, 8):
        q.push(t)
    assert not q.heap
    assert [q.pop() for _ in range(5)] == [5, 6, 7, 8, 9]
    # keys in decreasing order: each newcomer goes to the front, the queue stays a ring
    evens = list(range(2, 2 * ring + 2, 2))
    for t in reversed(evens):
        q.push(t)
    assert not q.heap and q.n == ring
    q.push(0)  # before the first one, or after the last one: still a ring
    q.push(2 * ring + 1)
    assert not q.heap
    q.remove(0)
    q.remove(2 * ring + 1)
    q.push(3)  # out of order (neither first nor last) in a long queue: the heap
    assert q.heap
    q.push(1)
    assert [q.pop() for _ in range(ring + 1)] == [1, 2, 3] + evens[1:-1]
    assert not q.heap and q.n == 1  # down to one entry: a ring again
    assert q.pop() == evens[-1] and q.n == 0


# ------------------------------------------------------------ whole runs
def burst_net(seed, k=48):
    """Two triggers (``go``, the step, and a faster ``tick``) each enable their consumers at
    once (``k`` in all), in a shuffled order relative to the consumers' ranks; the consumers
    share FIFO and priority resources and a few tokens, so that candidates with older requests
    come back among newer ones."""
    rng = np.random.default_rng(seed)
    net = Net(f"burst{seed}")
    net.resource("bus", 2, "fifo")
    net.resource("cpu", 1, "priority")
    net.resource("nic", 1, "fifo")
    net.place("tok", 3)
    group = {i: ("go" if i < (2 * k) // 3 else "tick") for i in range(k)}
    weight = {i: int(rng.integers(1, 4)) for i in range(k)}  # tokens per trigger firing
    for i in range(k):
        net.place(f"p{i}", 0)
        net.place(f"ret{i}", weight[i])
    for trig, dur, step in (("go", 1.0, True), ("tick", 0.375, False)):
        mine = [i for i in rng.permutation(k) if group[i] == trig]  # the order of its output arcs
        net.transition(trig, Deterministic(dur), inputs={f"ret{i}": weight[i] for i in mine},
                       outputs={f"p{i}": weight[i] for i in mine}, tags={"step": step})
    for i in rng.permutation(k):  # declaration order (ranks) unrelated to the arcs' order
        res = [("bus",), ("cpu",), ("nic", "bus"), (), (), (), ()][int(rng.integers(7))]
        inputs, outputs = {f"p{i}": 1}, {f"ret{i}": 1}
        if rng.random() < 0.25:  # competes for the few tokens of "tok"
            inputs["tok"] = 1
            outputs["tok"] = 1
        net.transition(f"c{i}", Deterministic(int(rng.integers(0, 9)) / 8), inputs=inputs,
                       outputs=outputs, resources=list(res), servers=[1, 2, float("inf")][int(rng.integers(3))],
                       priority=int(rng.integers(0, 3)))
    return net.validate()


BURSTS = (1, 2, 3, 4, 5)


@pytest.mark.parametrize("seed", BURSTS)
def test_burst_nets_give_the_reference_run(seed):
    net = burst_net(seed)
    kw = dict(steps=60, warmup=5, replications=1, seed=0, trace=True, trace_limit=20000)
    k, r = simulate(net, engine="generic", **kw), simulate_reference(net, **kw)
    kt, ktr = k.step_completion_times(0)
    rt, rtr = r.step_completion_times(0)
    assert kt.tolist() == rt.tolist() and ktr.tolist() == rtr.tolist()
    for name in ("transition", "start", "end"):
        assert k.trace[name].tolist() == r.trace[name].tolist(), name
    for t in net.transitions:
        assert k.firings(t)[0] == r.firings(t)[0], t
    kraw, rraw = k._raws[0], r._raws[0]
    assert list(kraw.wait_n) == list(rraw.wait_n)
    np.testing.assert_allclose(kraw.wait_sum, rraw.wait_sum, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kraw.busy, rraw.busy, rtol=1e-12, atol=1e-12)


_PROBE = r"""
import json, sys
import numpy as np
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from test_instant_queue import burst_net
from sgdnet import simulate
from sgdnet.engine import layout as K
from sgdnet.engine.kernel import candidates as C

seen = set()
push, pop, remove = C.instant_push, C.instant_pop, C.instant_remove

def w_push(ih, ihs, hd, n, heap, t, TD, TS, TF):
    back = (hd + n) % ih.size
    out = push(ih, ihs, hd, n, heap, t, TD, TS, TF)
    if heap:
        seen.add("heap push")
    elif out[2]:
        seen.add("ring to heap")
    elif out[1] != hd:
        seen.add("ring front")
    elif TD[t, K.TD_CPOS] == back:
        seen.add("ring back")
    else:
        seen.add("ring middle")
    return out

def w_pop(ih, hd, n, heap, TD, TS, TF):
    out = pop(ih, hd, n, heap, TD, TS, TF)
    if heap and not out[3]:
        seen.add("heap to ring")
    return out

def w_remove(ih, hd, n, heap, t, TD, TS, TF):
    out = remove(ih, hd, n, heap, t, TD, TS, TF)
    seen.add("heap remove" if heap else ("ring remove, front side" if out[1] != hd
                                         else "ring remove, back side"))
    return out

C.instant_push, C.instant_pop, C.instant_remove = w_push, w_pop, w_remove
for seed in json.loads(sys.argv[2]):
    simulate(burst_net(seed), engine="generic", steps=15, warmup=0, replications=1, seed=0,
             parallel=False)
print(json.dumps(sorted(seen)))
"""


def test_burst_nets_reach_every_branch_of_the_queue():
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT), json.dumps(list(BURSTS))],
                         env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = set(json.loads(out.stdout.strip().splitlines()[-1]))
    # the common push (after the last entry) and the ring's pop are written out in the kernel:
    # the helpers see the other cases
    assert seen == {"ring front", "ring middle", "ring to heap", "heap push", "heap to ring",
                    "heap remove", "ring remove, front side", "ring remove, back side"}
