"""The Monte Carlo engine: :func:`simulate` (public validator) -> parallel driver -> serial Numba
kernel; ``reference`` is the slow pure-Python oracle of the same semantics."""

from .api import default_max_events, simulate

__all__ = ["simulate", "default_max_events"]
