"""SGD variants: a registry of net builders by name.

Every variant compiles a (model, cluster) pair into a :class:`~sgdnet.net.Net` at one of two
granularities, as in the TPDS 2022 throughput-prediction paper:

``"fine"``
    each layer's forward and backward on the worker's GPU resource, each tensor's transfer on the
    NIC resources it crosses, and the server-side work, with their real dependencies;
``"coarse"``
    a worker's step is a compute phase followed by a communication phase, with no overlap,
    parameterised from profile totals only.

``sync-ps``, ``async-ps`` and ``allreduce`` also have ``"coarse+"``, the coarse model with the
heuristics of :mod:`.coarse` (backward overlap, last-message tail, PS pull lag, per-bucket
latency; ``docs/coarse.md``).

>>> from sgdnet import variants, Cluster, models
>>> "sync-ps" in variants.names()
True
>>> net = variants.build("allreduce", models.load("resnet18"), Cluster(workers=2),
...                      granularity="coarse")

One module per variant (``sync_ps``, ``async_ps``, ``ssp``, ``dssp``, ``allreduce``,
``local_sgd``, ``cocod``, ``pipe_sgd``, ``backup``); a module placed in this package registers
itself with :func:`register` and is imported the first time the registry is queried. The
shared building blocks, one concept each: :mod:`.registry`, :mod:`.options`, :mod:`.inputs`,
:mod:`.durations`, :mod:`.layers`, :mod:`.fabric` (bytes and bandwidth -> durations),
:mod:`.compute` (also per-worker batches), :mod:`.collectives` (all-reduce, PS exchange),
:mod:`.compression` (gradient compression) and :mod:`.parameter_server`.
This package builds nets only; it imports neither the engine nor the analysis of results
(:mod:`sgdnet.prediction`, :mod:`sgdnet.metrics` sit above it).

Conventions shared by all variants
------------------------------------------------------------------------
* A *step* is one worker's SGD step. Exactly one transition per worker is tagged ``step=True``:
  the worker's last compute operation of the step (backward of layer 0 in fine nets, the
  compute phase in coarse nets). Every worker completes it once per step, so in steady state
  its rate is the worker's step rate whichever once-per-step event is chosen.
* Transitions are tagged ``worker`` (int, when the operation belongs to a worker), ``kind``
  (``"compute"``, ``"comm"``, ``"update"``, ``"sync"``), ``layer`` (int, where it has one) and
  ``step`` (bool); resources are tagged ``host`` (``"worker3"``, ``"ps0"``) and ``kind``
  (``"gpu"``, ``"nic_up"``, ``"nic_down"``, ``"ps_cpu"``).
* ``net.meta`` records ``variant``, ``granularity``, ``model``, ``workers``, ``batch_size``,
  ``lockstep`` (True for bulk-synchronous variants) and the resolved ``options``.
"""

from __future__ import annotations

from .options import Option
from .registry import GRANULARITIES, VariantSpec, build, get, names, register

__all__ = ["Option", "VariantSpec", "GRANULARITIES", "register", "names", "get", "build"]
