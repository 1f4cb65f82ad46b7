"""The serial Numba kernel: one replication of a compiled net (:func:`run_replication`).

One module per concept, each with the invariant it keeps in its docstring:

=================  ================================================================================
``loop``           :func:`run_replication`: the state, then the event loop's phases A (enabling),
                   B (a start), C (flows, checkpoints, the batch of completions)
``enabling``       the token game, degrees, requests, the dirty list
``candidates``     the instant queue and the resources' waiting queues (scan-key order)
``event_heap``     the completion heap (completion time, start sequence)
``resources``      queued (fifo, priority) and processor-sharing resources
``flows``          links shared max-min fair by progressive filling, groups with virtual clocks
``gates``          lag and dynamic-lag gates
``durations``      the draws of the firing durations, modulators
``switches``       random switches among weighted candidates
``statistics``     busy times, sojourns, marking integrals, histograms, the outputs
``tables``         the per-transition row tables and the set-up of the request rings and buffers
``jit``            how the functions are compiled (``inner``, ``phase``) and their typed constants
``specialise``     the loop compiled once per set of features a net uses (compile-time constants)
=================  ================================================================================

Design (see docs/architecture.md "The engine" and the normative firing semantics):

- **State** is flat arrays allocated once per replication; per-transition data sits in row
  tables (``TS`` static, ``TD`` dynamic, ``TF`` float: one or two cache lines per transition).
  Firing *slots* hold (transition, start sequence, start time, remaining work, rate, completion
  time); a single-server transition owns slot ``t``, the others draw from a free list. Nothing
  is allocated per event; when a net needs more slots, requests or ps holders than sized, the
  kernel stops with ``ST_GROW`` and the driver replays the replication (same seed, same result)
  with 4x the room.
- **Incremental enabling**: only transitions adjacent to a changed place (inputs or inhibitor
  arcs, via a place -> transition CSR), to a changed gate, or whose own active count changed are
  put on a dirty list and re-evaluated; after a start the starter's own degree is known to drop
  by exactly one unless inhibitors or a dynamic_lag release are involved, and a completion
  re-tests its own transition only if the server bound was the binding one. A degree test stops
  at the first empty input; a join (more than ``JOIN_ARCS`` inputs) starts at the input that
  blocked it last time, so an arrival at a 64-way join usually reads one place, not 64.
- **Candidates** (:mod:`.candidates`): a transition with a pending request is in exactly one
  structure, the instant queue or the waiting queue of one busy resource, all ordered by the
  unique scan key ``(prio_class, oldest request time, rank)``, so repeatedly popping the minimum
  of the instant queue reproduces the normative scan. A candidate whose first resource is
  already full when it becomes a candidate goes straight to that resource's queue, which saves
  an instant-queue push and pop for ~0.4 of the completions of the bench model.
- **Completions** (:mod:`.event_heap`): all completions of one instant are applied (in start
  order) before the scan, zero-duration firings form the next batch of the same instant; the
  last completion of a batch is left at the root for the next start to replace.
- **Processor sharing** (:mod:`.resources`) and **flows** (:mod:`.flows`), **gates and
  modulators** (:mod:`.gates`, :mod:`.durations`: evaluated inside the enabling test and at
  starts/completions), **random switches** (:mod:`.switches`), **statistics**
  (:mod:`.statistics`).
- **Phases**: the phases and the queue operations of the hot path are ``phase`` helpers that LLVM
  always inlines into the loop, so the loop's machine code is what it was when they were written
  out there; helpers are compiled with ``_nrt=False`` (array arguments then carry no
  reference-count traffic). See :mod:`.jit`.

The kernel assumes a valid compiled net (see :mod:`sgdnet.net.compiled`) and never raises; it
reports a status code: 0 done, 1 deadlock, 2 event budget exhausted, 3 time does not advance,
4 needs more room, 5 halted by the caller (the ``halt`` flag: how Ctrl-C reaches a running kernel).

Every code it reads or writes is a named module-level integer, which numba folds into the
machine code: the status codes and output slots of :mod:`sgdnet.engine.abi`, the distribution
codes ``CODE_*`` of :mod:`sgdnet.dists`, and the resource disciplines ``DISC_*``, gate kinds
``GATE_*`` and modulator kinds ``MOD_*`` of :mod:`sgdnet.net.compiled`. Numba keys a function's
cache by its own file only, so each module lists the files its machine code embeds in
``JIT_DEPENDS`` (:mod:`sgdnet.engine.jitcache` walks the package).
"""

from __future__ import annotations

from . import loop, specialise
from .jit import HALT_POLL, WORK_PER_EVENT
from .loop import run_replication

#: the package's modules of compiled functions, for sgdnet.engine.jitcache (each has JIT_DEPENDS)
MODULES = ("jit", "candidates", "event_heap", "enabling", "resources", "flows", "gates",
           "durations", "switches", "statistics", "tables", "loop")

__all__ = ["run_replication", "HALT_POLL", "WORK_PER_EVENT", "MODULES", "loop", "specialise"]
