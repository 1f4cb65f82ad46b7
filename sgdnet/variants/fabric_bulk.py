"""Many transfers (and the places and transitions between them) added to a net at once.

A parameter-server net has a push and a pull per worker, shard and piece: 176,128
:meth:`.Fabric.transfer` calls for ResNet-50 on 1,024 workers (#14), each going through the
checked builder methods (:meth:`Net.place`, :meth:`Net.transfer`, :meth:`Net.transition`).
A :class:`TransferBatch` makes the same elements directly (:func:`~sgdnet.net.elements.new_place`,
:func:`~sgdnet.net.elements.new_transition`), in the same order, and adds them with one
:meth:`Net.insert` when it is flushed. Resources (links, connections, compute) are created as
the checked path creates them, at the call, so their order is the checked one too.

Contract: a batch builds the net :meth:`.Fabric.transfer`, :meth:`Net.place` and
:meth:`Net.transition` build, element by element (tests/test_bulk_ps.py ties the two paths; the
checked one is the reference). What the batch does not prepare itself (a node instead of a name,
a duration that is not a distribution, a path link with a latency of its own, a transfer to the
same host) goes the checked way at once, after what is pending; when :meth:`Net.insert` refuses
(a name taken or repeated) the pending elements are added one by one, in the checked path's
order, through :meth:`Net.place` and :meth:`Net.transition`, which report the first taken name
as the checked path does. No record of the calls is kept: a batch holds its elements only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..dists import Deterministic, Distribution
from ..net import Net
from ..net.elements import Place, Transition, new_place, new_transition
from .durations import duration
from .fabric import SEND_PRIORITY, Fabric, Host

__all__ = ["TransferBatch"]


def _all_str(*lists: Iterable) -> bool:
    """Whether every item of ``lists`` is a str (a name, not a node)."""
    for xs in lists:
        for x in xs:
            if type(x) is not str:
                return False
    return True


class TransferBatch:
    """Transfers, places and transitions collected for one :meth:`Net.insert`.

    Use it as the net and the fabric of a loop that adds only through it, then :meth:`flush`
    (or use it as a context manager, which flushes on a normal exit)::

        with TransferBatch(fab) as b:
            for i in range(n):
                p = b.place(f"w{i}.got", worker=i).name
                b.transfer(f"w{i}.push", nbytes, ("worker", i), ("ps", 0), inputs=[g[i]],
                           outputs=[p])

    Parameters
    ----------
    fabric : Fabric
        The fabric (and through it the net) the elements are added to.
    """

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.net: Net = fabric.net
        # the pending elements in the order the checked methods would create them (one list,
        # no record of the calls: a replay goes element by element, see flush)
        self._els: list[Place | Transition] = []
        self._pairs = fabric._bulk_pairs  # shared by the fabric's batches
        self._cvs: dict[tuple[str | None, int], tuple[float, float]] = {}
        self._lats: dict[float, Deterministic] = {}
        self._zero = Deterministic(0.0)  # the join stages' duration (their wait is the backlog)

    def __enter__(self) -> TransferBatch:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.flush()

    # -------------------------------------------------------------- the checked way
    def _checked(self, fn, args: tuple, kw: dict):
        """Flush what is pending, then call the checked builder ``fn`` now."""
        self.flush()
        return fn(*args, **kw)

    def flush(self) -> None:
        """Add the pending elements with one :meth:`Net.insert`; when it refuses, add them one
        by one, in the order the checked methods create them, through :meth:`Net.place` and
        :meth:`Net.transition`, which report the first taken name as the checked path does."""
        els = self._els
        if not els:
            return
        self._els = []
        places = [e for e in els if type(e) is Place]
        trans = [e for e in els if type(e) is not Place]
        if self.net.insert(places, trans):
            return
        net = self.net
        for e in els:
            if type(e) is Place:
                net.place(e.name, e.tokens, **e.tags)
            else:
                net.transition(e.name, e.duration, inputs=dict(e.inputs),
                               outputs=dict(e.outputs), resources=e.resources,
                               servers=e.servers, priority=e.priority, tags=dict(e.tags))

    # -------------------------------------------------------------- places, transitions
    def place(self, name: str, tokens: int = 0, **tags) -> Place:
        """:meth:`Net.place`, added at the flush."""
        if type(name) is not str or type(tokens) is not int:
            return self._checked(self.net.place, (name, tokens), tags)
        p = new_place(name, tokens, tags)
        self._els.append(p)
        return p

    def transition(self, name: str, duration: Distribution, *, inputs: Mapping[str, int],
                   outputs: Mapping[str, int], resources: Iterable[str] = (),
                   tags: Mapping[str, Any] | None = None, priority: int = 0,
                   servers: float = 1) -> Transition:
        """:meth:`Net.transition` with these arguments, added at the flush."""
        res = tuple(resources)
        if (type(name) is not str or not isinstance(duration, Distribution)
                or type(inputs) is not dict or type(outputs) is not dict
                or not _all_str(inputs, outputs, res)):
            return self._checked(self.net.transition, (name, duration),
                                 dict(inputs=inputs, outputs=outputs, resources=res, tags=tags,
                                      priority=priority, servers=servers))
        t = new_transition(name, duration, inputs, outputs, res, dict(tags or {}),
                           servers=servers, priority=priority)
        self._els.append(t)
        return t

    # -------------------------------------------------------------- transfers
    def _pair(self, src: Host, dst: Host, lane: int) -> tuple | None:
        """What a transfer's link stage needs from ``src`` to ``dst`` on ``lane``, its
        resources created as :meth:`.Fabric._link_stage` creates them (with flows the links of
        :meth:`.Fabric.flow_path`, CPU links included): ``(resources, latency,
        bandwidth)`` (bandwidth None with flows); None when the batch leaves it to the checked
        way (a path link that is not a flow link or has a latency of its own)."""
        key = (src, dst, lane)
        if key in self._pairs:
            return self._pairs[key]
        fab, net = self.fabric, self.net
        if fab.flows:
            links = fab.flow_path(src, dst)
            rs = [net.resources.get(ln) for ln in links]
            if not links or any(r is None or r.discipline != "flow" or r.latency != 0
                                for r in rs):
                got = None  # Net.transfer reports the link, or adds its own latency stage
            else:
                hs = fab.host_name(src)
                conn = net.connection(f"{hs}->{fab.host_name(dst)}" + (f"#{lane}" if lane else ""),
                                      {"host": hs})
                got = ((*links, conn), fab.latency(src, dst), None)
        else:
            bw = fab.bandwidth(src, dst)
            got = (tuple(fab.link_resources(src, dst)), fab.latency(src, dst), bw)
        self._pairs[key] = got
        return got

    def _cv(self, share: str | None, messages: int) -> tuple[float, float]:
        """The CVs of a transfer's CPU work and bytes (:meth:`.Fabric.transfer`)."""
        got = self._cvs.get((share, messages))
        if got is None:
            c, fab = self.fabric.cluster, self.fabric
            ccv = c.comm_cv if messages == 1 else c.comm_cv / math.sqrt(messages)
            cv = fab.flow_cv(share) if messages == 1 else fab.flow_cv(share) / math.sqrt(messages)
            got = self._cvs[share, messages] = (ccv, cv)
        return got

    def transfer(
        self,
        name: str,
        nbytes: float,
        src: Host,
        dst: Host,
        *,
        inputs: Iterable[str],
        outputs: Iterable[str],
        link_outputs: Iterable[str] = (),
        tags: Mapping[str, Any] | None = None,
        priority: int = 0,
        reduce: bool | float = False,
        lane: int = 0,
        share: str | None = None,
        latency: float | None = None,
        messages: int = 1,
    ) -> list[str]:
        """:meth:`.Fabric.transfer` (same arguments, same elements), added at the flush.

        Written again on purpose: this is the bulk twin of the checked
        :meth:`.Fabric.transfer`, which stays the reference; tests/test_bulk_ps.py ties the
        two (a change to one must be made to the other, or that test fails)."""
        fab = self.fabric
        ins, outputs, link_outputs = list(inputs), list(outputs), list(link_outputs)
        call = (name, nbytes, src, dst, ins, outputs, link_outputs, tags, priority, reduce, lane,
                share, latency, messages)
        if src == dst or type(name) is not str or not _all_str(ins, outputs, link_outputs):
            return self._transfer_now(*call)
        ccv, cv = self._cv(share, messages)
        tags = tags or {}
        els: list[Place | Transition] = []  # in the checked path's order
        names = []
        arcs = dict.fromkeys(ins, 1)
        send_s, recv_s = fab.cpu_stages(nbytes, reduce)
        if send_s is not None:
            sent = f"{name}:sent"
            els.append(new_place(sent, 0, {}))
            els.append(new_transition(
                f"{name}.send", duration(send_s, ccv), arcs, {sent: 1},
                (fab.host_compute(src),), {"kind": "comm", "step": False, **tags, "stage": "send"},
                priority=SEND_PRIORITY))
            names.append(f"{name}.send")
            arcs = {sent: 1}
        fab.ack_path(share, src, dst)
        backlog = fab.share_backlog(share, src, dst)
        if backlog is not None:
            joined = f"{name}:joined"
            els.append(new_place(joined, 0, {}))
            els.append(new_transition(
                f"{name}.join", self._zero, arcs, {joined: 1}, (),
                {"kind": "comm", "step": False, **tags, "stage": "join"}, servers=math.inf))
            els[-1].backlog = backlog
            names.append(f"{name}.join")
            arcs = {joined: 1}
        arrived = outputs
        if recv_s is not None:
            arrived = [f"{name}:arrived"]
            els.append(new_place(arrived[0], 0, {}))
        pair = self._pair(src, dst, lane)
        if pair is None:
            return self._transfer_now(*call)
        res, lat, bw = pair
        if latency is not None:
            lat = float(latency)
        lat += fab.tcp_ramp(nbytes, src, dst) + fab.share_queue(share, src, dst)
        cap = fab.flow_cap(share, src, dst)
        work = duration(nbytes, cv) if bw is None else duration(nbytes / bw, cv)
        # each transition's tags a dict of its own, keys in the checked path's order
        ltags = {"kind": "comm", "step": False, **tags, "stage": "link", "bytes": nbytes}
        if lat > 0:
            wire = f"{name}.wire"
            lname = f"{name}.lat"
            els.append(new_place(wire, 0, {}))
            els.append(new_transition(name, work, arcs, dict.fromkeys([*link_outputs, wire], 1),
                                      res, ltags, priority=priority))
            els[-1].flow_cap = cap
            d = self._lats.get(lat)
            if d is None:
                d = self._lats[lat] = Deterministic(lat)
            els.append(new_transition(lname, d, {wire: 1}, dict.fromkeys(arrived, 1), (),
                                      {"kind": "comm", "step": False, **tags, "stage": "latency"},
                                      servers=math.inf))
            names += [name, lname]
        else:
            els.append(new_transition(name, work, arcs,
                                      dict.fromkeys([*link_outputs, *arrived], 1), res, ltags,
                                      priority=priority))
            els[-1].flow_cap = cap
            names.append(name)
        if arrived is not outputs:
            els.append(new_transition(
                f"{name}.recv", duration(recv_s, ccv), {arrived[0]: 1},
                dict.fromkeys(outputs, 1), (fab.host_compute(dst),),
                {"kind": "comm", "step": False, **tags, "stage": "recv"}, priority=priority))
            names.append(f"{name}.recv")
        self._els += els
        return names

    def _transfer_now(self, name, nbytes, src, dst, inputs, outputs, link_outputs, tags,
                      priority, reduce, lane, share, latency, messages) -> list[str]:
        """Flush, then :meth:`.Fabric.transfer` now (a transfer the batch does not prepare)."""
        self.flush()
        return self.fabric.transfer(name, nbytes, src, dst, inputs=inputs, outputs=outputs,
                                    link_outputs=link_outputs, tags=tags, priority=priority,
                                    reduce=reduce, lane=lane, share=share, latency=latency,
                                    messages=messages)
