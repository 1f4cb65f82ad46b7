"""Ctrl-C held off :mod:`concurrent.futures`' machinery and acted on where it is safe.

A ``KeyboardInterrupt`` raised at an arbitrary bytecode can leave :mod:`concurrent.futures`
half-updated. Inside ``wait`` the main thread takes every future's lock in a loop: interrupted
there, it keeps some of them, the thread (or a process pool's manager thread) that ends such a
future blocks forever on its lock, and whatever then waits for that future waits forever. Inside
``ProcessPoolExecutor.submit`` a work item can be registered but never queued, and the pool's
shutdown then waits for it forever. A study's Ctrl-C test hung this way on CI.

:class:`Interrupts` replaces Python's SIGINT handler for the duration of :meth:`Interrupts.held`:
a Ctrl-C only records itself (and calls ``on_hold``, which may ask running kernels to stop), and
:meth:`Interrupts.check` acts on it at points where no such machinery is running.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Interrupts"]


class Interrupts:
    """Ctrl-C recorded while :meth:`held`, acted on by :meth:`check`.

    Acting on it calls the handler that was in place before (Python's raises
    ``KeyboardInterrupt``). :meth:`live` lets a Ctrl-C act at once inside a block (work done in
    this thread, e.g. a study row computed in this process). Only the main thread may install
    signal handlers; in another thread, and where SIGINT is ignored or handled outside Python,
    :meth:`held` changes nothing and :meth:`check` never acts.

    Parameters
    ----------
    on_hold : callable, optional
        Called (with no argument) from the signal handler when a Ctrl-C is recorded, if the
        handler :meth:`check` will call is known to raise ``KeyboardInterrupt`` (Python's, or a
        :meth:`live` one in front of it): e.g. it sets the halt flag that running kernels read,
        so that they stop before :meth:`check`. A handler of the program's own may return
        instead of raising (a "stop after this run" flag): nothing is halted for it, it is only
        called at :meth:`check`.
    """

    def __init__(self, on_hold: Callable[[], None] | None = None) -> None:
        self._on_hold = on_hold
        self._pending = False
        self._live = False
        self._old: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        if self._live:
            self._old(signum, frame)
            return
        self._pending = True
        if self._on_hold is not None and _raises(self._old):
            self._on_hold()

    def check(self) -> None:
        """Act on a Ctrl-C recorded while held (once)."""
        if self._pending:
            self._pending = False
            self._old(signal.SIGINT, None)

    @contextlib.contextmanager
    def held(self) -> Iterator[Interrupts]:
        """Record Ctrl-C instead of acting on it for the duration of the block; one recorded and
        not yet acted on is acted on at the block's end, unless an exception is on its way."""
        old = signal.getsignal(signal.SIGINT)
        installed = False
        if callable(old):  # else ignored, or a handler installed outside Python: left alone
            try:
                signal.signal(signal.SIGINT, self._handler)
                installed = True
            except ValueError:  # not the main thread: signal handlers are the main thread's
                pass
        if not installed:
            yield self  # outside any try: the block's own exceptions pass through untouched
            return
        self._old = old
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, old)
        self.check()

    @contextlib.contextmanager
    def live(self) -> Iterator[None]:
        """Let Ctrl-C act at once inside the block (after acting on one recorded before)."""
        self.check()
        self._live = True
        try:
            yield
        finally:
            self._live = False


def _raises(handler: Any) -> bool:
    """Whether calling ``handler`` for SIGINT now raises ``KeyboardInterrupt``: Python's own
    handler, or an :class:`Interrupts` handler that is :meth:`~Interrupts.live` in front of one
    that does."""
    if handler is signal.default_int_handler:
        return True
    owner = getattr(handler, "__self__", None)
    return isinstance(owner, Interrupts) and handler == owner._handler and owner._live \
        and _raises(owner._old)
