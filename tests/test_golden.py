"""Same-seed bit-identity: every registered variant, fine and coarse, on a small noisy
heterogeneous cluster with stragglers, simulates to exactly the outputs recorded from commit
07212ea (before the variants/engine/study refactor of issue #11), on the ``fifo`` network model
(the default until flows, issue #12).

``tests/data/golden_digests.json`` holds, per case, the sha256 of the net's transition, place
and resource names and of every array of every replication record (step times, firings, busy
and wait times, trace, gate log, events, window bounds, seeds). The file was written by
running this module as a script on commit 07212ea (``PYTHONPATH=. python tests/test_golden.py
--record``) and re-recorded once, deliberately, when the random stream changed to the
counter-based per-transition streams of :mod:`sgdnet.engine.rng` (issue #14; the nets, and the
outputs of deterministic cases, were unchanged by it); a refactor that changes a single bit of
any output fails here. A deliberate behaviour change re-records it in its own commit, saying why.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from sgdnet import Cluster, Layer, MarkovSlowdown, ModelProfile, StepSlowdown, simulate, variants

DIGESTS = Path(__file__).resolve().parent / "data" / "golden_digests.json"
PROF = ModelProfile("toy", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6),
                            Layer("c", 0.002, 0.004, 1e6)], batch_size=32)
#: Non-default options that take other code paths (tree, priority, chunks, PS sharing, ...).
EXTRA = [("allreduce", {"algorithm": "tree", "bucket_bytes": 0}),
         ("sync-ps", {"priority": True, "partition_bytes": 3e6}),
         ("sync-ps", {"discipline": "ps", "placement": "colocated"}),
         ("ssp", {"impl": "places"}), ("local-sgd", {"sync": "ps"}),
         ("cocod", {"balance": "batch"}), ("pipe-sgd", {"bucket_bytes": 0}),
         ("backup", {"late": "abort", "backups": 1})]
STRAGGLERS = {"step": lambda: StepSlowdown(0.2, 3, workers=[0, 2]),
              "markov": lambda: MarkovSlowdown(4, 0.5, 0.2)}


def cases() -> list[tuple[str, dict, str, str]]:
    """(variant, options, granularity, straggler) for every registered variant and ``EXTRA``."""
    out = []
    for name, opts in [(n, {}) for n in variants.names()] + EXTRA:
        for g in ("fine", "coarse"):
            if opts.get("late") == "abort" and g == "fine":
                continue
            for s in STRAGGLERS:
                out.append((name, opts, g, s))
    return out


def key(name: str, opts: dict, granularity: str, straggler: str) -> str:
    return f"{name}{json.dumps(opts, sort_keys=True)}|{granularity}|{straggler}"


def digest(name: str, opts: dict, granularity: str, straggler: str) -> str:
    """sha256 of the net's names and of every output array of a fixed-seed simulation."""
    c = Cluster(workers=3, speeds=[1.0, 0.8, 0.5], compute_cv=0.1, comm_cv=0.2, ps_shards=2,
                latency="50us", straggler=STRAGGLERS[straggler]())
    # the digests were recorded before flows became the default network model: they pin the
    # FIFO NIC model, which must stay bit-identical (flows are checked by tests/test_flows*.py);
    # variants without the option (pipeline) are pinned on their flows
    fifo = {"discipline": "fifo"} if "discipline" in variants.get(name).option_names() else {}
    net = variants.build(name, PROF, c, granularity=granularity, **{**fifo, **opts})
    res = simulate(net, steps=40, warmup=6, replications=2, seed=5, trace=True, trace_limit=300)
    h = hashlib.sha256()
    for names in (net.transitions, net.places, net.resources):
        h.update("|".join(names).encode() + b"\0")
    h.update(repr(list(res.seeds)).encode())
    for r in res._raws:
        h.update(repr((r.t0, r.t1, r.events)).encode())
        for f in ("step_times", "step_trans", "firings", "busy", "wait_sum", "wait_n",
                  "trace_trans", "trace_start", "trace_end", "gate_log"):
            a = np.ascontiguousarray(getattr(r, f))
            h.update(f"{f}:{a.dtype}:{a.shape}".encode())
            h.update(a.tobytes())
    return h.hexdigest()


def _recorded() -> dict:
    return json.loads(DIGESTS.read_text())


def test_every_registered_variant_is_recorded():
    missing = sorted({k for k in map(lambda c: key(*c), cases())} - set(_recorded()))
    assert not missing, (f"no golden digest for {missing}; record the new variant's outputs "
                         "(python tests/test_golden.py --record) in the commit that adds it")


@pytest.mark.parametrize("case", cases(), ids=lambda c: key(*c))
def test_same_seed_outputs_are_bit_identical(case):
    want = _recorded().get(key(*case))
    if want is None:
        pytest.fail(f"{key(*case)} has no recorded digest")
    assert digest(*case) == want


if __name__ == "__main__":  # PYTHONPATH=. python tests/test_golden.py --record
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/test_golden.py --record")
    DIGESTS.parent.mkdir(exist_ok=True)
    DIGESTS.write_text(json.dumps({key(*c): digest(*c) for c in cases()}, indent=1,
                                  sort_keys=True) + "\n")
    print(f"recorded {len(cases())} digests in {DIGESTS}")
