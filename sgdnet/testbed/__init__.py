"""An emulated cluster on one Linux machine, real training on it, and calibration.

* :mod:`.netns` -- network namespaces behind a bridge, links shaped with ``tc tbf`` both ways,
  guaranteed teardown (:class:`EmulatedCluster`).
* :mod:`.worker` -- the per-host training program (``torch.distributed``, gloo): sync PS, async
  PS, ring all-reduce per layer, DDP with buckets; plus the calibration jobs of :mod:`.bench`.
* :mod:`.runner` -- launches, interleaved campaigns, step rates from step-end timestamps.
* :mod:`.quiet` -- the quiet gate (other tenants' CPU during each job).
* :mod:`.fit` -- pure fitting of the calibration (link alpha/beta/burst, incast curve, costs,
  how unevenly concurrent TCP flows share a link).
* :mod:`.calibrate` -- calibration runs -> a cluster file (:mod:`sgdnet.workload.cluster_file`).
* :mod:`.ps_efficiency` -- the PS-traffic probe's runs and a PS host's downlink efficiency
  fitted to them (``sgdnet calibrate --ps-probe``, ``link.ps_efficiency``).
* :mod:`.sharing` -- the fluid models (max-min, FIFO, age-weighted) that read how TCP shares a
  link from staggered messages (``scripts/sharing_probe.py``'s ``in-stagger``).

Needs Linux, root and iproute2 for the emulated cluster, and torch for the training processes
(``pip install sgdnet[testbed]``); the fitting and the cluster files need neither.
"""

from __future__ import annotations

from .fit import (
    IncastFit,
    LinearFit,
    LinkFit,
    ShareFit,
    fit_incast,
    fit_linear,
    fit_link,
    fit_share_cv,
)
from .netns import EmulatedCluster, can_create_namespaces

__all__ = ["EmulatedCluster", "can_create_namespaces", "LinkFit", "IncastFit", "LinearFit",
           "ShareFit", "fit_link", "fit_incast", "fit_linear", "fit_share_cv"]
