"""The Monte Carlo engine: :func:`simulate` (public validator) -> parallel driver -> serial Numba
kernel; ``fastpath`` is the max-plus recursion ``simulate`` picks for timed event graphs and
``fastpath_fifo`` the sort-then-queue recursion for rounds on shared FIFO links
(``engine="auto"``); ``reference`` is the slow pure-Python oracle of the same semantics."""

from .api import default_max_events, simulate

__all__ = ["simulate", "default_max_events"]
