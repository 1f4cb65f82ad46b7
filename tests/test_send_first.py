"""A pushed layer's send stage goes before the next layer's backward (wait-free backprop).

A PS worker's gradient hook issues the push of layer ``l`` before the backward of layer
``l - 1`` goes on (the testbed's worker, ``sgdnet/testbed/worker.py``, and the frameworks'
hooks). With ``cpu_overlap=False`` the push's send stage (``send_s_per_byte * b``) sits on the
worker's compute, where it becomes ready at the very instant the next backward does; it must win
that tie, so on the first step of a lone worker (nothing else on its links; the pulls come
back after the backward, so only the sends share its compute with the backwards)::

    push.l{l}.send starts at   sum(fwd) + sum(bwd of layers L-1 .. l) + s * sum(b of L-1 .. l+1)
    push.l{l} (the flow) ends  max(that + s * b_l, end of push.l{l+1}) + b_l / B
                               (s = send_s_per_byte; one connection: a message at a time)

and not one backward later. Both engines.
"""

from __future__ import annotations

import pytest

from sgdnet import Cluster, Layer, ModelProfile, simulate, variants
from sgdnet.engine.reference import simulate_reference

ENGINES = pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])
B = 12.5e6
MB = 1e6
FWD = (1e-3, 2e-3, 3e-3)
BWD = (4e-3, 20e-3, 30e-3)  # long backwards, as a slowed-down worker's
BYTES = (MB, 0.5 * MB, 0.25 * MB)


@ENGINES
@pytest.mark.parametrize("variant", ["async-ps", "sync-ps"])
def test_push_is_sent_before_the_next_backward(sim, variant):
    prof = ModelProfile("three", [Layer(f"l{k}", f, b, g)
                                  for k, (f, b, g) in enumerate(zip(FWD, BWD, BYTES))],
                        batch_size=8)
    send = 0.1 / B
    c = Cluster(workers=1, bandwidth=B, latency=0.0, send_s_per_byte=send,
                recv_s_per_byte=1.0 / B)
    net = variants.build(variant, prof, c)
    res = sim(net, steps=2, warmup=0, replications=1, seed=0, trace=True)
    first = {}
    for e in sorted(res.trace_events(0), key=lambda e: e["start"]):
        first.setdefault(e["name"], (e["start"], e["end"]))
    prev = 0.0
    for lay in reversed(range(len(FWD))):
        bwd_end = sum(FWD) + sum(BWD[lay:]) + send * sum(BYTES[lay + 1:])
        start, _ = first[f"w0.push.l{lay}.c0.send"]
        assert start == pytest.approx(bwd_end, abs=1e-12)
        _, end = first[f"w0.push.l{lay}.c0"]
        prev = max(bwd_end + send * BYTES[lay], prev) + BYTES[lay] / B
        assert end == pytest.approx(prev, rel=1e-9)
