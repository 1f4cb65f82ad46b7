"""A TCP connection's state from the kernel: ``TCP_INFO`` and BBR's ``TCP_CC_INFO``."""

from __future__ import annotations

import socket
import struct

__all__ = ["tcp_info", "bbr_info", "tcp_state"]


def tcp_info(sock: socket.socket) -> dict[str, float]:
    """The fields of ``TCP_INFO`` this module uses (seconds, bytes, bytes/s; ``delivery_Bps``
    the last delivery-rate sample, ``app_limited`` whether it was taken while the sender had
    nothing to send, ``busy_s`` the time so far with data in flight, ``rwnd_limited_s`` /
    ``sndbuf_limited_s`` the part of it limited by the receiver's window / the send buffer,
    where the kernel reports them)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    u32 = lambda off: struct.unpack_from("I", raw, off)[0]  # noqa: E731
    u64 = lambda off: struct.unpack_from("Q", raw, off)[0]  # noqa: E731
    n = len(raw)
    return {"rto_s": u32(8) * 1e-6, "mss": u32(16), "unacked": u32(24), "rtt_s": u32(68) * 1e-6,
            "cwnd": u32(80), "pacing_Bps": float(u64(104)), "bytes_acked": u64(120),
            "min_rtt_s": u32(148) * 1e-6 if n >= 152 else None,
            "delivery_Bps": float(u64(160)) if n >= 168 else None,
            "app_limited": bool(raw[7] & 1),
            "busy_s": u64(168) * 1e-6 if n >= 192 else None,
            "rwnd_limited_s": u64(176) * 1e-6 if n >= 192 else None,
            "sndbuf_limited_s": u64(184) * 1e-6 if n >= 192 else None}


_TCP_CC_INFO = getattr(socket, "TCP_CC_INFO", 26)


def bbr_info(sock: socket.socket) -> dict[str, float] | None:
    """BBR's own state of a connection (``TCP_CC_INFO``): its bottleneck-bandwidth estimate
    (``bw_Bps``), its min RTT and its pacing and cwnd gains; None if the connection does not
    run BBR."""
    cc = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0]
    if cc != b"bbr":
        return None
    lo, hi, mrtt, pg, cg = struct.unpack("5I", sock.getsockopt(socket.IPPROTO_TCP,
                                                                _TCP_CC_INFO, 20)[:20])
    return {"bw_Bps": float((hi << 32) | lo), "min_rtt_s": mrtt * 1e-6,
            "pacing_gain": pg / 256, "cwnd_gain": cg / 256}


def tcp_state(sock: socket.socket) -> list[float]:
    """A compact record of a sending connection's state: ``[cwnd (segments), srtt s, pacing
    B/s, last delivery rate B/s, BBR's bandwidth estimate B/s (0 without BBR), BBR's pacing
    gain, unacked segments]``."""
    i, b = tcp_info(sock), bbr_info(sock)
    return [i["cwnd"], i["rtt_s"], i["pacing_Bps"], i["delivery_Bps"] or 0.0,
            b["bw_Bps"] if b else 0.0, b["pacing_gain"] if b else 0.0, i["unacked"]]
