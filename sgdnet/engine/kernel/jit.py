"""How the kernel's functions are compiled, and the typed constants they pass each other.

Invariant: every function of the kernel package is compiled once (one signature), with
``cache=True``. Integer and bool arguments of helpers are passed as int64 / bool *values*
(:data:`I0`, :data:`FALSE`, ...), never as literals: numba compiles a helper once per distinct
argument types, and a literal ``0`` or ``False`` is a type of its own.

- :data:`inner`: helpers only jitted code calls, compiled with ``_nrt=False`` (array arguments
  carry no reference-count traffic, which otherwise dominated the event loop) and without
  numba's CPython and C wrappers (~1/3 less LLVM work on a cold compile).
- :data:`phase`: the event loop's phases and hot queue operations; LLVM always inlines them into
  :func:`sgdnet.engine.kernel.loop.run_replication`, so its machine code is what it was with their
  code written out there. (numba's own ``inline="always"`` inlines the IR instead, and the
  NRT-enabled loop then took and dropped a reference to every array argument at every inlined
  call: 0.36-0.51x the speed on the anchors' nets.) A phase takes at most 30 arguments: CPython
  compiles a call of more into one that packs them in a tuple, and numba then takes a reference
  to every array of it. ``forceinline`` passes to callees that do not set it, so :data:`inner`
  sets it to False.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# random numbers: sgdnet.engine.rng (one counter-based stream per transition, modulator and the
# random switches; the kernel keeps each stream's base and draw counter)
U = np.uint64
# integer arguments of helpers as int64 values, not literals: numba compiles a helper once per
# distinct argument types, and a literal 0 is a type of its own (Literal[int](0))
I0, I1, IM1 = (np.int64(k) for k in (0, 1, -1))
# and a bool argument as a bool value: a variable first set from a literal False is typed
# Literal[bool](False) until type inference unifies it, and a helper it is passed to is compiled
# for both types
FALSE, TRUE = np.bool_(False), np.bool_(True)
#: The decorator of the helpers only jitted code calls (see the module doc). The helpers also
#: called from Python (``sample``, the instant-queue functions) keep their wrappers.
inner = njit(cache=True, _nrt=False, error_model="numpy", no_cpython_wrapper=True,
             no_cfunc_wrapper=True, forceinline=False)
#: The decorator of the event loop's phases and hot queue operations (see the module doc).
phase = njit(cache=True, _nrt=False, error_model="numpy", no_cpython_wrapper=True,
             no_cfunc_wrapper=True, forceinline=True)

HALT_POLL = 4096  # completions between two reads of the halt flag
WORK_PER_EVENT = 16  # holders re-rated (ps) or flows re-allocated that count as one completion
# a transition with more input arcs than this is a join: its degree test starts at a watched arc
JOIN_ARCS = 4
