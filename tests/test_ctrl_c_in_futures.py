"""Ctrl-C landing inside :mod:`concurrent.futures`' own machinery (``sgdnet/_interrupts.py``).

``wait`` takes every future's lock in a loop; a ``KeyboardInterrupt`` raised inside that loop
left the main thread holding some of them, so the thread that ends such a future blocked forever
and so did everything waiting for it: a CI run's Ctrl-C test of a two-process study hung this way.
Each case runs in a child process whose ``_AcquireFutures.__enter__`` receives SIGINT after
taking the first lock of the main thread's ``nth`` wait (as a Ctrl-C at that loop's backward jump
would; with one future it is the only lock); the child must report the interrupt and exit, not
hang.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: Prepended to every child: SIGINT inside the lock loop of the main thread's ``NTH``-th wait.
PATCH = """
import concurrent.futures._base as B
import signal, sys, threading

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
_enter, _seen = B._AcquireFutures.__enter__, [0]

def enter(self):
    futs = list(self.futures)
    if threading.current_thread() is threading.main_thread() and futs:
        _seen[0] += 1
        if _seen[0] == NTH:
            futs[0]._condition.acquire()
            signal.raise_signal(signal.SIGINT)  # the handler runs here, one lock taken
            for f in futs[1:]:
                f._condition.acquire()
            return None
    return _enter(self)

B._AcquireFutures.__enter__ = enter
"""

STUDY = """
import concurrent.futures as cf, time
from sgdnet import Study

def runner(variant, model, cluster, *, seed, **kw):
    time.sleep(0.01)
    return {"samples_per_s_mean": float(cluster.workers)}

pool = cf.ThreadPoolExecutor(2)
try:
    Study(grid={"cluster.workers": list(range(1, 60))}, fixed={"variant": "a", "model": "m"},
          runner=runner).run(pool, out=sys.argv[1], max_pending=4)
except KeyboardInterrupt:
    print("interrupted", flush=True)
pool.shutdown(wait=True)
"""

SIMULATE = """
from sgdnet import Net, simulate
from sgdnet.dists import Exponential

net = Net()
net.place("a", tokens=1)
net.place("b")
net.transition("f", 1.0, inputs={"a": 1}, outputs={"b": 1})
net.transition("g", Exponential(1.0), inputs={"b": 1}, outputs={"a": 1})
try:  # ~1e9 completions: minutes, unless the Ctrl-C stops it
    simulate(net, steps=5 * 10**8, warmup=0, replications=2, seed=1, parallel=True,
             max_events=2 * 10**9, step="f", engine=sys.argv[2], progress=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def _child(body: str, nth: int, *args: str) -> subprocess.CompletedProcess:
    code = PATCH.replace("NTH", str(nth)) + textwrap.dedent(body) + "\nprint('exit', flush=True)\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              env=env, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the child hung after a Ctrl-C inside concurrent.futures.wait")


def test_study_on_a_pool_survives_ctrl_c_inside_wait(tmp_path):
    """The study stops, its pool shuts down and the finished rows are in the table."""
    from sgdnet.study import read_table

    out = tmp_path / "r.csv"
    got = _child(STUDY, 6, str(out))
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["interrupted", "exit"]
    assert 1 <= len(read_table(out)) < 59


@pytest.mark.parametrize("engine", ["generic", "auto"])
def test_simulate_survives_ctrl_c_inside_wait(engine):
    """The generic engine's replications and a fast path's chunks stop; simulate raises
    KeyboardInterrupt instead of waiting forever."""
    got = _child(SIMULATE, 3, "x", engine)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["interrupted", "exit"]
