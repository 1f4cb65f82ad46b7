"""Ctrl-C, progress and threads of the fast paths (sgdnet.engine.fastrun).

- a FIFO-path run of ~1e9 steps is interrupted 0.3 s in: KeyboardInterrupt is raised, every
  kernel call has returned (nothing left running), and far fewer rounds were made than the run
  needs (it stopped early instead of running on);
- both paths report step completions to ``progress`` (non-decreasing, ending at the total),
  and ``parallel=`` and ``progress`` do not change a result.
"""

import signal
import threading

import numpy as np
import pytest
from test_fastpath import random_eg
from test_fastpath_fifo import ps_net

from sgdnet import simulate
from sgdnet.engine import fastpath, fastpath_fifo
from sgdnet.net.compiled import compile_net


@pytest.fixture(scope="module")
def fifo():
    cn = compile_net(ps_net(11, det=False))
    assert not fastpath_fifo.fifo_path_problems(cn) and fastpath.fast_path_problems(cn)
    return cn


@pytest.fixture(scope="module")
def eg():
    cn = compile_net(random_eg(301, det=False))
    assert not fastpath.fast_path_problems(cn)
    return cn


@pytest.mark.parametrize("parallel", [False, True])
def test_ctrl_c_stops_a_fifo_path_run(fifo, monkeypatch, parallel):
    simulate(fifo, steps=20, warmup=0, replications=2, seed=1, engine="fast")  # caches loaded
    entered, rounds, late, halts = [], [], [], []
    real, real_chunk = fastpath_fifo._rounds, fastpath_fifo._chunk

    def chunk_spy(*args):
        halts.append(args[7])  # the shared halt flag
        return real_chunk(*args)

    def spy(*args):
        entered.append(1)
        late.append(bool(halts[0][0]))  # the flag was already set when this call began
        k = real(*args)
        rounds.append(k)
        return k

    monkeypatch.setattr(fastpath_fifo, "_rounds", spy)
    monkeypatch.setattr(fastpath_fifo, "_chunk", chunk_spy)
    steps = 10**9  # ~minutes of rounds
    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    timer = threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            simulate(fifo, steps=steps, warmup=0, replications=2, seed=1, parallel=parallel,
                     samples=False, max_events=10**12, engine="fast")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
    assert entered and len(entered) == len(rounds)  # every kernel call returned
    # a chunk reads the flag after every call: at most one call each can begin once it is set
    # (one that was starting as it came)
    assert halts and halts[0][0] == 1 and sum(late) <= len(halts)
    ns = len(fifo.step_transitions)
    assert max(rounds) * ns < steps // 100  # stopped early (rounds are relative to compaction,
    # so this bounds the last call's window only; the count of calls bounds the rest)
    assert len(rounds) * fastpath_fifo.POLL_WORK < steps
    monkeypatch.undo()  # the paths stay usable
    assert simulate(fifo, steps=20, warmup=0, replications=2, seed=1, engine="fast").engine == "fast-fifo"


@pytest.mark.parametrize("which", ["fast", "fifo"])
def test_fast_paths_report_progress_and_ignore_threads(which, fifo, eg):
    cn, run = (eg, fastpath.run_fast) if which == "fast" else (fifo, fastpath_fifo.run_fifo)
    seeds = [11, 12, 13]
    kw = dict(steps=20_000, warmup=100, samples=True, max_events=10**9)
    calls = []
    plain = run(cn, seeds, parallel=False, **kw)
    threaded = run(cn, seeds, parallel=True, progress=calls.append, **kw)
    assert calls and calls == sorted(calls) and calls[-1] == 3 * 20_100
    for a, b in zip(plain, threaded):
        assert (a.t0, a.t1, a.events) == (b.t0, b.t1, b.events)
        np.testing.assert_array_equal(a.step_times, b.step_times)
        np.testing.assert_array_equal(a.firings, b.firings)


def test_simulate_shows_the_fast_paths_progress(fifo, capsys):
    with_bar = simulate(fifo, steps=5000, warmup=10, replications=2, seed=9, progress=True)
    assert with_bar.engine == "fast-fifo" and f"simulate {fifo.name}" in capsys.readouterr().err
    without = simulate(fifo, steps=5000, warmup=10, replications=2, seed=9)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(with_bar.throughput.samples, without.throughput.samples)
