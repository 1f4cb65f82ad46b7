"""``paused_gc()``: no cyclic garbage collection while a large net is built or compiled.

Building a net allocates millions of small objects that all stay alive (elements, their dicts,
tuples); each generation-2 collection then walks all of them, which made building and compiling
a 1024-worker fine net grow faster than linearly (~30 % of the time at 128 workers). Nothing
allocated there is garbage, so collection waits until the block ends (cycles made inside are
collected afterwards as usual).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block (re-entrant; restores the previous state)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
