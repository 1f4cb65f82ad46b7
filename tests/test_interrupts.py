"""``sgdnet._interrupts.Interrupts`` on its own: what it records, when it acts, what it leaves
alone (the end-to-end cases are in ``test_ctrl_c_in_futures.py``)."""

from __future__ import annotations

import contextlib
import signal
import threading

import pytest

from sgdnet._interrupts import Interrupts


@pytest.fixture
def sigint():
    """Restore the SIGINT handler after the test, whatever it set."""
    old = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("handler", [signal.default_int_handler, signal.SIG_IGN, signal.SIG_DFL],
                         ids=["python", "ignored", "default"])
def test_the_blocks_own_exceptions_pass_through(sigint, handler):
    """A ValueError (or any exception) raised inside the block comes out as itself, whether
    the handler was swapped (Python's) or left alone (ignored, default)."""
    signal.signal(signal.SIGINT, handler)
    with pytest.raises(ValueError, match="boom"):
        with Interrupts().held():
            raise ValueError("boom")
    assert signal.getsignal(signal.SIGINT) == handler


def test_held_ctrl_c_is_recorded_then_raised_by_check(sigint):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    calls = []
    stop = Interrupts(on_hold=lambda: calls.append(1))
    with pytest.raises(KeyboardInterrupt):
        with stop.held():
            signal.raise_signal(signal.SIGINT)
            assert calls == [1]  # recorded (and on_hold called), not raised
            stop.check()
            pytest.fail("check() did not act")  # pragma: no cover
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_not_checked_is_raised_at_the_blocks_end(sigint):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with Interrupts().held():
            signal.raise_signal(signal.SIGINT)
            reached.append(1)
    assert reached == [1]


def test_live_acts_at_once_and_an_ignored_sigint_stays_ignored(sigint):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stop = Interrupts()
    with stop.held():
        with pytest.raises(KeyboardInterrupt):
            with stop.live():
                signal.raise_signal(signal.SIGINT)
                pytest.fail("live() held it")  # pragma: no cover
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with Interrupts().held() as stop:
        signal.raise_signal(signal.SIGINT)  # ignored by the process: nothing recorded
        stop.check()


def test_outside_the_main_thread_nothing_changes(sigint):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    seen = []

    def other():
        with Interrupts().held():
            seen.append(signal.getsignal(signal.SIGINT))

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert seen == [signal.default_int_handler]


def test_on_hold_only_where_the_handler_will_raise(sigint):
    """``on_hold`` (the engine's halt) runs for Python's handler, for a live Interrupts in front
    of it, and not for a handler of the program's own, which may return instead of raising."""
    calls = []

    def record(signum, frame):
        calls.append("own")

    for handler, halts in ((signal.default_int_handler, True), (record, False)):
        signal.signal(signal.SIGINT, handler)
        halted = []
        with pytest.raises(KeyboardInterrupt) if halts else contextlib.nullcontext():
            with Interrupts(on_hold=lambda h=halted: h.append(1)).held():
                signal.raise_signal(signal.SIGINT)
        assert halted == ([1] if halts else [])
    assert calls == ["own"]  # called (at the block's end), once
    signal.signal(signal.SIGINT, signal.default_int_handler)
    outer = Interrupts()
    with outer.held(), outer.live():
        halted = []
        with pytest.raises(KeyboardInterrupt):
            with Interrupts(on_hold=lambda: halted.append(1)).held():
                signal.raise_signal(signal.SIGINT)
        assert halted == [1]


def test_a_handler_that_returns_does_not_cut_a_simulation_short(sigint, monkeypatch):
    """A program's own SIGINT handler that only records the signal (to stop after the current
    run, say): a Ctrl-C in the middle of a simulation calls it once, and the run completes as if
    nothing happened (the engine halts its kernels only for a handler that will raise)."""
    import time

    from sgdnet import Net, simulate
    from sgdnet.dists import Exponential

    net = Net()
    net.place("a", tokens=1)
    net.place("b")
    net.transition("f", 1.0, inputs={"a": 1}, outputs={"b": 1})
    net.transition("g", Exponential(1.0), inputs={"b": 1}, outputs={"a": 1})
    kw = dict(steps=1_500_000, warmup=0, replications=2, seed=5, parallel=True, step="f",
              engine="generic", samples=False)
    ref = simulate(net, **kw)
    from sgdnet.engine import kernel

    real, timers = kernel.run_replication, []

    def ctrl_c_soon(*args):  # in an engine thread, as the kernel starts: Ctrl-C to the caller
        if not timers:
            timers.append(threading.Timer(0.02, signal.pthread_kill,
                                          (threading.main_thread().ident, signal.SIGINT)))
            timers[0].start()
        return real(*args)

    monkeypatch.setattr(kernel, "run_replication", ctrl_c_soon)
    got = []
    signal.signal(signal.SIGINT, lambda signum, frame: got.append(time.monotonic()))
    try:
        r = simulate(net, **kw)
        ended = time.monotonic()
    finally:
        timers[0].cancel()
    assert len(got) == 1 and got[0] < ended  # the Ctrl-C came during the run
    assert r.firings("f").tolist() == ref.firings("f").tolist() == [1_500_000, 1_500_000]
    assert r.throughput.samples.tolist() == ref.throughput.samples.tolist()
