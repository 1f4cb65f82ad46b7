"""The fast paths' kept history memory (sgdnet.engine.history_pool).

- the pool itself: a given-back array is reused (same memory), the smallest large-enough one is
  taken, views give back their owner, at most KEEP_BYTES are kept (the oldest freed first), a
  taken array is nobody else's until given back;
- the fast paths never read a history element their run did not write: with every history
  filled with NaN, and with histories that start at two rounds and grow over and over (each
  growth hands the old memory back while the run goes on), runs are those of fresh memory —
  serially and with replications on two threads sharing the pool.
"""

import numpy as np
import pytest
from test_fastpath import random_eg
from test_fastpath_fifo import ps_net

import sgdnet.engine.fastpath as fp
import sgdnet.engine.fastpath_fifo as ff
from sgdnet import simulate
from sgdnet.engine import history_pool as hp


@pytest.fixture
def pool(monkeypatch):
    """An empty pool for the test (the process's kept arrays are left alone)."""
    monkeypatch.setattr(hp, "_kept", [])
    return hp


def test_given_back_memory_is_taken_again(pool):
    a = pool.take(1000)
    assert a.size == 1000 and pool.kept_bytes() == 0
    pool.give_back(a[10:20].reshape(2, 5))  # a view gives back its owner
    assert pool.kept_bytes() == 8000
    b = pool.take(600)
    assert b.size == 600 and np.shares_memory(a, b)
    assert pool.kept_bytes() == 0  # taken: nobody else gets it until given back
    c = pool.take(600)
    assert not np.shares_memory(b, c)


def test_the_smallest_large_enough_array_is_taken(pool):
    big, small = pool.take(5000), pool.take(2000)
    pool.give_back(big, small)
    assert np.shares_memory(pool.take(1500), small)
    assert np.shares_memory(pool.take(1500), big)
    assert not np.shares_memory(pool.take(1500), big)  # none left: a new array


def test_at_most_keep_bytes_are_kept_oldest_freed_first(pool, monkeypatch):
    monkeypatch.setattr(hp, "KEEP_BYTES", 8 * 3000)
    a, b, c = pool.take(1000), pool.take(1500), pool.take(1000)
    pool.give_back(a)
    pool.give_back(b)
    pool.give_back(c)  # 3,500 elements: a goes
    assert pool.kept_bytes() == 8 * 2500
    assert not np.shares_memory(pool.take(1000), a)
    pool.give_back(pool.take(3001))  # larger than the budget alone: not kept
    pool.give_back(b)  # already kept (taken by nobody): not kept twice
    assert pool.kept_bytes() <= 8 * 3000
    pool.give_back(np.zeros(10, dtype=np.int64), np.zeros((4, 4))[:, 0])  # not float64 / not 1-D
    pool.drop()
    assert pool.kept_bytes() == 0


def test_held_hands_back_what_the_list_holds_at_the_end_and_grow_keeps_the_contents(pool):
    with pool.held(100, 50) as hold:
        first = hold[0]
        first[:] = np.arange(100.0)
        hold[0] = pool.grow(first.reshape(10, 10), 300)  # a view is fine: C order
        np.testing.assert_array_equal(hold[0][:100], np.arange(100.0))
        assert hold[0].size == 300 and pool.kept_bytes() == 800  # the old one went back
        grown = hold[0]
    assert pool.kept_bytes() == 8 * (100 + 300 + 50)  # all three are the pool's again
    assert np.shares_memory(pool.take(300), grown)


def _nan_take(n):
    """A history full of NaN: a run that read an element it did not write would carry it."""
    return np.full(n, np.nan)


def _same_raws(a, b, exact=True):
    """The same records; ``exact=False``: the running sums (busy time, waits, sojourns, marking
    integrals) to rounding, as when a FIFO-path history drops its rounds at other times."""
    for ra, rb in zip(a._raws, b._raws, strict=True):
        assert (ra.t0, ra.t1, ra.events) == (rb.t0, rb.t1, rb.events)
        for f in ("step_times", "step_trans", "firings", "wait_n", "sojourn_n", "busy",
                  "wait_sum", "sojourn_sum", "token_time"):
            x, y = getattr(ra, f), getattr(rb, f)
            assert (x is None) == (y is None), f
            if x is None:
                continue
            if exact or f in ("step_times", "step_trans", "firings", "wait_n", "sojourn_n"):
                np.testing.assert_array_equal(x, y, err_msg=f)
            else:
                np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12, err_msg=f)


def _from_two_rounds(monkeypatch):
    """Histories that start at two rounds: grown (the old memory handed back) again and again."""
    for mod in (fp, ff):
        monkeypatch.setattr(mod, "first_rounds", lambda need, per_round, extra: 2)


CASES = ([("eg", s, det) for s in range(4) for det in (True, False)]
         + [("fifo", s, det) for s in range(4) for det in (True, False)])


@pytest.mark.parametrize("kind, seed, det", CASES)
def test_runs_read_only_what_they_wrote(kind, seed, det, pool, monkeypatch):
    net = random_eg(300 + seed, det=det) if kind == "eg" else ps_net(300 + seed, det=det)
    kw = dict(steps=150, warmup=[0, 7][seed % 2], replications=4, seed=5, engine="fast",
              parallel=False)
    want = simulate(net, **kw)
    assert want.engine == ("fast" if kind == "eg" else "fast-fifo")
    monkeypatch.setattr(hp, "take", _nan_take)  # NaN-filled histories
    _same_raws(simulate(net, **kw), want)
    _from_two_rounds(monkeypatch)  # ... grown from two rounds (a NaN would reach the sums)
    _same_raws(simulate(net, **kw), want, exact=kind == "eg")
    # the real pool again, still growing from two rounds, the replications on two threads
    monkeypatch.undo()
    monkeypatch.setattr(hp, "_kept", [])
    _from_two_rounds(monkeypatch)
    _same_raws(simulate(net, **{**kw, "parallel": True}), want, exact=kind == "eg")
    assert hp.kept_bytes() > 0  # the histories went back to the pool


def test_a_run_after_another_net_reuses_its_memory_and_gives_its_own_answer(pool):
    a, b = random_eg(401, det=False), ps_net(402, det=False)
    kw = dict(steps=200, warmup=10, replications=2, seed=3, engine="fast", parallel=False)
    first_b = simulate(b, **kw)
    assert hp.kept_bytes() > 0
    simulate(a, **kw)  # a's histories now hold a's rounds
    _same_raws(simulate(b, **kw), first_b)
