"""An emulated cluster on one Linux machine: network namespaces, a bridge, shaped veth links.

Topology (needs root, ``ip`` and ``tc``)::

    namespace {prefix}-{pid}-sw : bridge br0, ports p0 .. p{H-1}     (the switch)
    namespace {prefix}-{pid}-h{i}: eth0 = 10.213.0.{i+1}/24, lo        (host i)

Host ``i``'s link is the veth pair ``eth0`` (in the host) -- ``p{i}`` (on the switch), shaped in
both directions with ``tc tbf`` (rate, burst): *upload* on ``eth0``'s egress, *download* on
``p{i}``'s egress. With ``delay > 0`` a ``netem`` qdisc adds one-way delay on both sides, if
the kernel has netem (detected; :attr:`EmulatedCluster.netem` tells). Nothing is created in
the root namespace, and only addresses inside these namespaces are used.

Teardown is guaranteed: :class:`EmulatedCluster` is a context manager whose exit kills every
process still running in its namespaces and deletes them, on normal exit, on an exception and on
Ctrl-C / SIGTERM (turned into ``KeyboardInterrupt`` while the cluster is up); an ``atexit``
hook is the last resort. Namespaces of an earlier run of this module whose process is gone are
deleted at set-up (their names carry the creating pid), never anyone else's.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from ..errors import TestbedError
from ..units import bandwidth as _parse_rate
from ..units import nbytes as _parse_bytes
from ..workload._quantity import seconds as _parse_seconds

__all__ = ["EmulatedCluster", "PREFIX", "cleanup_stale", "can_create_namespaces",
           "netem_available", "parse_burst", "tc_size"]

#: Prefix of every namespace this module creates.
PREFIX = "sgdtb"
SUBNET = "10.213.0"
_NAME = re.compile(rf"^{PREFIX}-(\d+)-(sw|h\d+)$")


def _run(cmd: Sequence[str], check: bool = True, timeout: float = 30.0
         ) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise TestbedError(f"{cmd[0]!r} not found; the testbed needs iproute2 ('ip', 'tc')"
                           ) from None
    except subprocess.TimeoutExpired:
        raise TestbedError(f"command timed out after {timeout:.0f} s: {' '.join(cmd)}") from None
    if check and p.returncode != 0:
        raise TestbedError(f"command failed ({p.returncode}): {' '.join(cmd)}: "
                           f"{(p.stderr or p.stdout).strip()}")
    return p


def parse_burst(value: float | str, what: str = "burst") -> float:
    """A token-bucket depth in bytes, unambiguous for tc users.

    sgdnet's sizes (:mod:`sgdnet.units`): ``KB`` = 1000 bytes, ``KiB`` = 1024 bytes, ``B`` or a
    bare number = bytes. tc reads ``64kb`` or ``64k`` as 64 KiB (tc(8), "Parameters": "kb or k
    = Kilobytes", 1024), while sgdnet reads a lowercase ``b`` as bits (``64kb`` = 8000 bytes):
    so a size in bits (``kb``, ``kbit``, ``Mb``, ...) is refused here, naming both readings.
    """
    if isinstance(value, str):
        m = re.match(r"^\s*([0-9.eE+-]+)\s*([A-Za-z]*)\s*$", value)
        unit = m.group(2) if m else ""
        if m and unit and (unit[-1] == "b" or unit.endswith("bit") or unit in ("k", "K")):
            x = float(m.group(1))
            bits = (f"sgdnet reads a lowercase 'b' as bits ({_parse_bytes(value, what=what):.0f}"
                    " bytes)" if unit not in ("k", "K") else "sgdnet has no bare 'k'")
            raise TestbedError(
                f"{what}={value!r} is ambiguous: tc reads {x:g}kb or {x:g}k as {x:g} KiB "
                f"({x * 1024:.0f} bytes), {bits}; write {x:g}KiB ({x * 1024:.0f} bytes, tc's "
                f"{x:g}kb) or {x:g}KB ({x * 1000:.0f} bytes), or a number of bytes")
    return _parse_bytes(value, what=what)


def tc_size(nbytes: float) -> str:
    """``nbytes`` as tc writes bytes exactly: ``"65536b"`` (tc(8): "b or a bare number =
    Bytes"), rounded to a whole byte."""
    return f"{int(round(nbytes))}b"


def _list_ns() -> list[str]:
    p = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_ns_procs(ns: str) -> None:
    p = _run(["ip", "netns", "pids", ns], check=False)
    pids = [int(x) for x in p.stdout.split() if x.isdigit() and int(x) != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3.0
        while pids and time.monotonic() < deadline:
            pids = [q for q in pids if _pid_alive(q) and not _is_zombie(q)]
            time.sleep(0.05)
        if not pids:
            return


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _delete_ns(ns: str) -> None:
    _kill_ns_procs(ns)
    _run(["ip", "netns", "del", ns], check=False)


def cleanup_stale() -> list[str]:
    """Delete this module's namespaces whose creating process is gone; returns their names."""
    gone = []
    for ns in _list_ns():
        m = _NAME.match(ns)
        if m and not _pid_alive(int(m.group(1))):
            _delete_ns(ns)
            gone.append(ns)
    return gone


def can_create_namespaces() -> tuple[bool, str]:
    """Whether this process can build the testbed: ``(ok, reason if not)``."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "not root (network namespaces need CAP_SYS_ADMIN)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"'{tool}' (iproute2) not found"
    ns = f"{PREFIX}-{os.getpid()}-h999"
    p = _run(["ip", "netns", "add", ns], check=False)
    if p.returncode != 0:
        return False, f"'ip netns add' failed: {p.stderr.strip()}"
    try:
        q = _run(["ip", "-n", ns, "link", "add", "tbprobe", "type", "bridge"], check=False)
        if q.returncode != 0:
            return False, f"cannot create a Linux bridge: {q.stderr.strip()}"
    finally:
        _delete_ns(ns)
    return True, ""


def netem_available(ns: str) -> bool:
    """Whether ``tc ... netem`` works (tried on ``lo`` of namespace ``ns``, then removed)."""
    p = _run(["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
             check=False)
    if p.returncode == 0:
        _run(["tc", "-n", ns, "qdisc", "del", "dev", "lo", "root"], check=False)
        return True
    return False


class EmulatedCluster:
    """``hosts`` network namespaces behind one bridge, each link shaped both ways.

    Parameters
    ----------
    hosts : int
        Number of hosts (namespaces), 1..200.
    rate : float or str
        Link rate each direction, bytes/s or a string (``"100Mbit/s"``).
    burst : float or str
        Token-bucket depth, bytes (``"64KB"`` = 64000, ``"64KiB"`` = 65536, tc's ``64kb``;
        :func:`parse_burst` refuses the ambiguous ``"64kb"``); passed to tc as exact bytes;
        must hold at least one full-size packet.
    delay : float or str
        One-way delay added on each side (``"1ms"``); needs netem (raises if missing).
    queue_latency : float or str
        ``tbf latency``: how long a packet may wait in the shaper queue before being dropped
        (default 100 ms; ``sgdnet calibrate --queue``), passed to tc in microseconds.

    Examples
    --------
    >>> with EmulatedCluster(3, rate="100Mbit/s") as c:     # doctest: +SKIP
    ...     subprocess.run(c.exec_args(1, ["python", "-c", "print(1)"]))
    """

    def __init__(self, hosts: int, rate: float | str = "100Mbit/s", burst: float | str = "64KB",
                 delay: float | str = 0.0, queue_latency: float | str = "100ms"):
        if isinstance(hosts, bool) or not isinstance(hosts, int) or not 1 <= hosts <= 200:
            raise TestbedError(f"hosts={hosts!r}: must be an integer in 1..200")
        self.hosts = hosts
        self.rate = _parse_rate(rate, what="testbed rate")
        self.burst = parse_burst(burst, what="testbed burst")
        if self.burst < 2000:
            raise TestbedError(f"burst={burst!r}: must hold at least one 1500-byte packet "
                               "(use e.g. '16KB' or more)")
        self.delay = _parse_seconds(delay, what="testbed delay")
        self.queue_latency = _parse_seconds(queue_latency, what="tbf queue latency")
        if not self.queue_latency > 0:
            raise TestbedError(f"queue={queue_latency!r}: the tbf queue latency must be > 0 "
                               "(e.g. '100ms', the default)")
        self.token = f"{PREFIX}-{os.getpid()}"
        self.netem: bool | None = None
        self._up = False
        self._old: dict[int, Any] = {}

    # ------------------------------------------------------------------ names
    @property
    def switch(self) -> str:
        """Name of the switch namespace."""
        return f"{self.token}-sw"

    def ns(self, i: int) -> str:
        """Name of host ``i``'s namespace."""
        if not 0 <= i < self.hosts:
            raise TestbedError(f"host {i} out of range 0..{self.hosts - 1}")
        return f"{self.token}-h{i}"

    @staticmethod
    def addr(i: int) -> str:
        """Host ``i``'s address (``10.213.0.{i+1}``)."""
        return f"{SUBNET}.{i + 1}"

    def exec_args(self, i: int, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped to run inside host ``i``'s namespace."""
        return ["ip", "netns", "exec", self.ns(i), *argv]

    def namespaces(self) -> list[str]:
        return [self.switch] + [self.ns(i) for i in range(self.hosts)]

    # ------------------------------------------------------------------ set-up / teardown
    def __enter__(self) -> EmulatedCluster:
        ok, why = can_create_namespaces()
        if not ok:
            raise TestbedError(f"cannot build the emulated cluster: {why}")
        cleanup_stale()
        for ns in self.namespaces():  # our own pid's leftovers (an earlier cluster in-process)
            if ns in _list_ns():
                _delete_ns(ns)
        self._install_signals()
        atexit.register(self.teardown)
        self._up = True
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.teardown()

    def _install_signals(self) -> None:
        def handler(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        try:
            for sig in (signal.SIGTERM, signal.SIGHUP):
                self._old[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: rely on __exit__ and atexit
            self._old.clear()

    def _build(self) -> None:
        sw = self.switch
        _run(["ip", "netns", "add", sw])
        _run(["ip", "-n", sw, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", sw, "link", "set", "br0", "up"])
        for i in range(self.hosts):
            h = self.ns(i)
            _run(["ip", "netns", "add", h])
            _run(["ip", "-n", sw, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0",
                  "netns", h])
            _run(["ip", "-n", sw, "link", "set", f"p{i}", "master", "br0"])
            _run(["ip", "-n", sw, "link", "set", f"p{i}", "up"])
            _run(["ip", "-n", h, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0"])
            _run(["ip", "-n", h, "link", "set", "eth0", "up"])
            _run(["ip", "-n", h, "link", "set", "lo", "up"])
        self.netem = netem_available(self.ns(0))
        if self.delay > 0 and not self.netem:
            raise TestbedError(f"delay={self.delay:g} s needs the 'netem' qdisc, which this "
                               "kernel does not have (sch_netem); use delay=0")
        self.shape(self.rate, self.burst)

    def congestion_control(self, name: str) -> None:
        """Every host's TCP congestion control for new connections (``bbr``, ``reno``, ...:
        what ``net.ipv4.tcp_allowed_congestion_control`` of a namespace allows)."""
        for i in range(self.hosts):
            r = subprocess.run(self.exec_args(i, ["sysctl", "-q", "-w",
                                                  f"net.ipv4.tcp_congestion_control={name}"]),
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise TestbedError(f"congestion control {name!r} refused on host {i}: "
                                   f"{r.stderr.strip()}; use one the kernel allows in a "
                                   "namespace (e.g. bbr or reno)")

    def shape(self, rate: float | str, burst: float | str | None = None) -> None:
        """(Re)shape every link, both directions, to ``rate`` (and ``burst``)."""
        self.rate = _parse_rate(rate, what="testbed rate")
        if burst is not None:
            self.burst = parse_burst(burst, what="testbed burst")
        r = f"{self.rate * 8:.0f}bit"
        b = tc_size(self.burst)
        lat = f"{self.queue_latency * 1e6:.0f}us"
        for i in range(self.hosts):
            for ns, dev in ((self.ns(i), "eth0"), (self.switch, f"p{i}")):
                _run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
                if self.delay > 0:
                    _run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:",
                          "netem", "delay", f"{self.delay * 1e6:.0f}us"])
                    parent = ["parent", "1:", "handle", "2:"]
                else:
                    parent = ["root"]
                _run(["tc", "-n", ns, "qdisc", "add", "dev", dev, *parent, "tbf", "rate", r,
                      "burst", b, "latency", lat])

    def qdisc_stats(self) -> dict[str, str]:
        """``tc -s qdisc`` of every shaped device (sent, dropped, overlimits), by name."""
        out = {}
        for i in range(self.hosts):
            for ns, dev, name in ((self.ns(i), "eth0", f"h{i}.up"),
                                  (self.switch, f"p{i}", f"h{i}.down")):
                p = _run(["tc", "-n", ns, "-s", "qdisc", "show", "dev", dev], check=False)
                out[name] = " ".join(p.stdout.split())
        return out

    def teardown(self) -> None:
        """Kill everything running in the namespaces and delete them (idempotent)."""
        if not self._up:
            return
        self._up = False
        try:
            existing = set(_list_ns())
            for ns in reversed(self.namespaces()):
                if ns in existing:
                    _delete_ns(ns)
        finally:
            for sig, old in self._old.items():
                try:
                    signal.signal(sig, old)
                except (ValueError, TypeError):
                    pass
            self._old.clear()
            try:
                atexit.unregister(self.teardown)
            except Exception:  # noqa: BLE001 - interpreter shutting down
                pass

    def __repr__(self) -> str:
        return (f"EmulatedCluster(hosts={self.hosts}, rate={self.rate * 8 / 1e6:g} Mbit/s, "
                f"burst={self.burst:g} B, delay={self.delay:g} s, up={self._up})")
