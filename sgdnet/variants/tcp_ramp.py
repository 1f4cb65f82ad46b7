"""What TCP adds to a flow's fair share (issue #37): slow start after idle, and BBR's pacing.

Two closed forms the :class:`~sgdnet.variants.fabric.Fabric` turns into elements of a net (a
latency, a rate cap), their parameters measured by micro-benchmarks
(:mod:`sgdnet.testbed.tcp_probe`), never by the training runs being predicted.

Slow start after idle (:func:`slow_start_time`, :func:`ramp_delay`)
    A connection idle for longer than its retransmission timeout restarts from the initial
    window when ``net.ipv4.tcp_slow_start_after_idle`` is 1 (RFC 5681 section 4.1, RFC 7661;
    Linux's default), 10 segments (RFC 6928). In slow start the window doubles every round trip
    (one ACK per segment, RFC 5681 section 3.1), so a message of ``b`` bytes on a path of
    bandwidth ``B`` and round-trip time ``R`` sends ``w_k = W0 2^k`` bytes in round ``k`` while
    ``w_k < B R`` (the window does not yet fill the pipe: the round lasts ``R``), then the rest
    at ``B``::

        T(b) = K R + (b - W0 (2^K - 1)) / B,    K = rounds with w_k < B R whose bytes
                                                     fit in b (see slow_start_time)

    ``ramp_delay = T(b) - b / B`` is what the restart adds to the link time: 0 when the
    initial window already covers the bandwidth-delay product (``W0 >= B R``), e.g. the
    emulated testbed's 14,480 B window against its 0.8 KB pipe (100 Mbit/s, 65 us measured
    by :mod:`sgdnet.testbed.tcp_probe`).

BBR's pacing while sharing (:func:`pacing_cap`)
    BBR (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue 14(5), 2016;
    draft-cardwell-iccrg-bbr-congestion-control) paces a flow at ``gain x`` its bottleneck
    bandwidth estimate, the maximum delivery rate over the last ~10 round trips, with a gain
    cycling 1.25, 0.75, 1, ... (mean 1). A flow that shared a host's link with ``k - 1``
    others measured about ``B / k`` and keeps that pace for several round trips after the
    others stopped: the link is not fully used while fewer than ``k`` of them send. The model
    caps every flow that is one of ``k`` concurrent connections into / out of one host at
    ``factor x B / k`` bytes/s; ``factor`` is the measured ratio of the flows' pacing rate to
    their fair share while ``k`` flows stream (:func:`sgdnet.testbed.tcp_probe.probe_cluster`).
    With all ``k`` flows sending the cap does not bind (``factor >= 1``); with fewer the link
    runs at ``min(1, m factor / k)`` of its bandwidth for ``m`` senders.
"""

from __future__ import annotations

import math

from ..errors import VariantError

__all__ = ["slow_start_time", "ramp_delay", "pacing_cap", "IW_SEGMENTS", "MSS"]

#: Initial window in segments (RFC 6928).
IW_SEGMENTS = 10
#: Ethernet TCP payload per segment with timestamps (1500 - 20 - 20 - 12 bytes).
MSS = 1448


def _positive(name: str, v: float, allow_zero: bool = False) -> float:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (
        v >= 0 if allow_zero else v > 0)
    if not ok:
        raise VariantError(f"{name}={v!r}: must be a finite number {'>=' if allow_zero else '>'} 0")
    return float(v)


def slow_start_time(nbytes: float, bandwidth: float, rtt: float,
                    init_window: float = IW_SEGMENTS * MSS) -> float:
    """Seconds to deliver ``nbytes`` from a restarted window (see the module docstring).

    Parameters
    ----------
    nbytes : float
        Message size, bytes (>= 0).
    bandwidth : float
        Bottleneck bandwidth ``B``, bytes/s.
    rtt : float
        Round-trip time ``R`` of the idle path, seconds (>= 0).
    init_window : float
        Initial congestion window ``W0``, bytes (10 x MSS, RFC 6928).

    Returns
    -------
    float
        ``K R + (nbytes - W0 (2^K - 1)) / B``: ``K`` whole rounds of ``R`` while the window is
        below the pipe ``B R`` and the message is not done (the last of them carries what is
        left when the message ends inside the ramp: ``K R`` exactly, its bytes within the
        round), then the rest at ``B``. ``nbytes / B`` when ``W0 >= B R``.
    """
    b = _positive("nbytes", nbytes, allow_zero=True)
    bw = _positive("bandwidth", bandwidth)
    r = _positive("rtt", rtt, allow_zero=True)
    w = _positive("init_window", init_window)
    pipe = bw * r
    t, sent = 0.0, 0.0
    while w < pipe and sent < b:
        t += r  # a round that does not fill the pipe lasts one round trip
        sent += w
        w *= 2.0
    if sent >= b:
        return t
    return t + (b - sent) / bw


def ramp_delay(nbytes: float, bandwidth: float, rtt: float,
               init_window: float = IW_SEGMENTS * MSS) -> float:
    """What a restart from ``init_window`` adds to the link time: :func:`slow_start_time`
    minus ``nbytes / bandwidth`` (>= 0; 0 when ``init_window >= bandwidth * rtt``)."""
    return max(0.0, slow_start_time(nbytes, bandwidth, rtt, init_window)
               - _positive("nbytes", nbytes, allow_zero=True) / bandwidth)


def pacing_cap(bandwidth: float, flows: int, factor: float) -> float:
    """The rate cap of one of ``flows`` concurrent TCP connections sharing a link of
    ``bandwidth`` bytes/s whose pace is ``factor`` times their fair share: ``factor *
    bandwidth / flows`` (``math.inf`` when ``factor`` is 0, i.e. no pacing model, or one flow).
    """
    bw = _positive("bandwidth", bandwidth)
    f = _positive("factor", factor, allow_zero=True)
    if isinstance(flows, bool) or not isinstance(flows, int) or flows < 1:
        raise VariantError(f"flows={flows!r}: must be an integer >= 1")
    if f == 0 or flows == 1:
        return math.inf
    return f * bw / flows
