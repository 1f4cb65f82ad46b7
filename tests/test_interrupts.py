"""``sgdnet._interrupts.Interrupts`` on its own: what it records, when it acts, what it leaves
alone (the end-to-end cases are in ``test_ctrl_c_in_futures.py``)."""

from __future__ import annotations

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
