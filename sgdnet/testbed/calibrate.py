"""Calibration: micro-benchmarks on a cluster -> a cluster file sgdnet reads.

Three steps, usable separately:

1. :func:`calibration_jobs` -- the job list (point-to-point size sweep and streams per link,
   k-to-1 and 1-to-k concurrent sends, CPU costs of reduce and PS update, the local SGD step,
   the single-worker profile) that :mod:`sgdnet.testbed.worker` runs on every host of a group:
   on the emulated cluster (:func:`calibrate_testbed`) or on any gloo cluster, by starting
   ``python -m sgdnet.testbed.worker spec.json RANK`` on each host (``sgdnet calibrate
   --write-spec``) and collecting the ``rank*.json`` files (``sgdnet calibrate --from-records``).
2. :func:`build_cluster_file` -- the ranks' raw records -> a
   :class:`~sgdnet.workload.cluster_file.ClusterFile` (fits from :mod:`.fit`).
3. ``ClusterFile.save(path)``; ``Cluster.from_file(path)`` / ``--cluster FILE`` read it.

How each figure is derived (``build_cluster_file``):

* the round trip of (``S`` bytes, 4-byte ack), per size the median over messages, pooled over
  the measured pairs, is fitted as ``2 alpha + max(0, S - b) / B`` (:func:`.fit.fit_link`,
  dropping a point whose relative residual exceeds ``reject``, noted): the one-way time of
  ``S`` bytes is the round trip minus ``alpha`` (the ack's way back). No single point is
  subtracted from the others, so one noisy 4-byte round trip cannot zero the latency;
* sustained bandwidth ``B`` = streamed bytes (minus the burst) / (stream round trip - the
  fitted empty round trip ``2 alpha``), median over streams and pairs; then ``alpha`` and the
  token-bucket burst by :func:`.fit.fit_link` with ``B`` fixed (a negative ``alpha`` is clamped
  to 0 and noted; ``measurements.latency_se_s`` is the latency's resolution, from the spread of
  the sub-burst round trips);
* incast: ``k`` senders -> rank 0, goodput ``(k S - burst) / (t - alpha)`` (the shared link's
  bucket passes one burst at line rate); the efficiencies relative to
  ``B`` and their curve by :func:`.fit.fit_incast` (likewise 1-to-``k`` for the fan-out);
* sharing (``link.share_cv``): the same runs' per-flow completion times, shifted by the
  latency (plus the ack's for the fan-out) minus the burst's head start, through
  :func:`.fit.fit_share_cv` -- how far TCP's sharing of one host's link among ``k`` concurrent
  connections departs from max-min (``in``: k-to-1, ``out``: 1-to-k);
* CPU per byte of send and receive: the sender's / receiver's process CPU time (all threads)
  during the streams / bytes; reduce: slope of :func:`.fit.fit_linear` over ``acc += buf``
  timings; PS update: intercept (per tensor) and slope (per byte) of the same fit over the PS's
  own update function; local SGD step: median forward + backward + ``SGD.step``.

Quality (``sgdnet calibrate --repeats N``, default 3): the job list runs ``N`` times,
interleaved, in one launch (:func:`calibration_jobs` ``repeats``); :func:`split_repeats` gives
each repeat's records, :func:`build_cluster_file` one file per repeat, and
:func:`combine_repeats` the file written: every figure the mean over the repeats, with its 95 %
Student-t interval, ``n`` and worst relative residual in the ``calibration`` block
(:func:`.fit.figure_intervals`), and a verdict (:func:`.fit.judge_quality`: ``good`` or
``low`` with the problems) that ``sgdnet calibrate`` turns into exit status 3.

The PS update cost and the local step are those of calibrate's own update function and model
(:mod:`.ops`, :mod:`.models`): :func:`save_cluster_file` writes a comment saying to replace them
with the user's profile, and ``--profile FILE`` takes them from it (:func:`with_profile`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CalibrationError
from ..workload.cluster_file import ClusterFile, Link
from .fit import (
    figure_intervals,
    fit_incast,
    fit_linear,
    fit_link,
    fit_share_cv,
    judge_quality,
)

__all__ = ["calibration_jobs", "build_cluster_file", "calibrate_testbed", "SWEEP_SIZES",
           "decide_comm_uses_compute", "CPU_BOUND_COMM", "sharing_figures", "with_sharing",
           "split_repeats", "combine_repeats", "figures_of", "save_cluster_file", "with_profile",
           "DEFAULT_REJECT", "DEFAULT_REPEATS"]

#: Relative residual beyond which a point is dropped from a fit (and noted).
DEFAULT_REJECT = 0.25
#: Repeats of the calibration's job list (the intervals need at least 2).
DEFAULT_REPEATS = 3

#: Message sizes of the point-to-point sweep, bytes.
SWEEP_SIZES = (4, 1024, 8192, 32768, 65536, 131072, 262144, 524288, 1048576, 2097152)


def calibration_jobs(world: int, *, model: str = "tb-mlp", batch: int = 32,
                     sizes: Sequence[int] = SWEEP_SIZES, reps: int = 5, gap_s: float = 0.03,
                     stream_msgs: int = 8, stream_msg_bytes: int = 1 << 20,
                     incast_bytes: int = 1 << 20, incast_reps: int = 10,
                     profile: bool = True, only: Sequence[str] | None = None,
                     repeats: int = 1) -> list[dict]:
    """The calibration's job list for a group of ``world`` hosts (rank 0 = the PS host).

    ``gap_s`` must let a token bucket refill between sweep messages (burst / rate).
    ``only``: keep the jobs of these kinds (e.g. ``("incast",)`` for the sharing figures).
    ``repeats > 1``: every job but the profile ``repeats`` times, repeat after repeat, ids
    suffixed ``@r`` (:func:`split_repeats` separates the records again).
    """
    if repeats < 1:
        raise CalibrationError(f"repeats={repeats}: give 1 or more (3 or more for intervals)")
    if world < 2:
        raise CalibrationError(f"world={world}: calibration needs at least 2 hosts")
    pairs = [[1, 0], [0, 1]] + ([[1, 2]] if world > 2 else [])
    jobs: list[dict] = [
        {"kind": "p2p", "id": "p2p", "pairs": pairs, "sizes": list(sizes), "reps": reps,
         "gap_s": gap_s, "stream_msgs": stream_msgs, "stream_msg_bytes": stream_msg_bytes,
         "stream_reps": 3},
        {"kind": "incast", "id": "incast-in", "direction": "in", "nbytes": incast_bytes,
         "reps": incast_reps, "gap_s": gap_s},
        {"kind": "incast", "id": "incast-out", "direction": "out", "nbytes": incast_bytes,
         "reps": incast_reps, "gap_s": gap_s},
        {"kind": "costs", "id": "costs", "model": model, "batch": batch, "rank": 0},
    ]
    if repeats > 1:
        jobs = [{**j, "id": f"{j['id']}@{r}"} for r in range(repeats) for j in jobs]
    if profile:
        jobs.append({"kind": "profile", "id": "profile", "model": model, "batch": batch,
                     "rank": 1})
    if only is not None:
        jobs = [j for j in jobs if j["kind"] in set(only)]
    return jobs


def split_repeats(ranks: list[dict]) -> list[list[dict]]:
    """The ranks' records of a repeated job list (ids ``name@r``) as one list of records per
    repeat, ids without the suffix; jobs without a suffix (the profile) go with the first.
    Records of an unrepeated list come back as ``[ranks]``."""
    def rep_of(j: dict) -> int | None:
        head, _, tail = str(j.get("id", "")).rpartition("@")
        return int(tail) if head and tail.isdigit() else None

    reps = sorted({r for rk in ranks for j in rk["jobs"] if (r := rep_of(j)) is not None})
    if not reps:
        return [ranks]
    out = []
    for r in reps:
        out.append([{**rk, "jobs": [
            {**j, "id": str(j["id"]).rpartition("@")[0]} if rep_of(j) is not None else j
            for j in rk["jobs"] if rep_of(j) == r or (rep_of(j) is None and r == reps[0])]}
            for rk in ranks])
    return out


def _job(ranks: list[dict], kind: str, key: str, jid: str | None = None) -> list[Any]:
    found = []
    for rk in ranks:
        for j in rk["jobs"]:
            if j["kind"] == kind and (jid is None or j.get("id") == jid) and key in j:
                found.append(j[key])
    return found


#: ``comm_uses_compute`` is set when the measured CPU time of sending plus receiving a byte,
#: times the link bandwidth, reaches this fraction: the CPU is then busy for most of a transfer.
CPU_BOUND_COMM = 0.5


def decide_comm_uses_compute(cpu: dict[str, float], bandwidth: float) -> tuple[bool, str]:
    """``comm_uses_compute`` from measured costs: ``True`` when the CPU time of sending plus
    receiving a byte, times the bandwidth, reaches :data:`CPU_BOUND_COMM`; with the reason."""
    busy = (cpu.get("send_s_per_byte", 0.0) + cpu.get("recv_s_per_byte", 0.0)) * bandwidth
    flag = busy >= CPU_BOUND_COMM
    return flag, (f"comm_uses_compute: {str(flag).lower()} (send + receive CPU keeps a host "
                  f"busy {busy:.1%} of a transfer's link time; threshold {CPU_BOUND_COMM:.0%})")


def sharing_figures(ranks: list[dict], alpha: float, burst: float, bandwidth: float
                    ) -> tuple[dict[str, float], dict[str, dict], list[str]]:
    """``link.share_cv`` (``{"in": cv, "out": cv}``) from the incast runs' per-flow completion
    times (runs recorded without them are skipped), the fits' details by direction, and notes.

    The shift subtracted from every completion time is the latency (twice for ``out``, whose
    times end with an ack) minus the time the burst's head start saves."""
    share: dict[str, float] = {}
    details: dict[str, dict] = {}
    notes: list[str] = []
    for direction in ("in", "out"):
        runs = [r for part in _job(ranks, "incast", "incast", f"incast-{direction}")
                for r in part["runs"] if "ends" in r]
        if not any(r["k"] >= 2 for r in runs):
            continue
        offset = (2 if direction == "out" else 1) * alpha - burst / bandwidth
        f = fit_share_cv([r["k"] for r in runs], [r["ends"] for r in runs], offset=offset)
        share[direction] = f.cv
        details[direction] = {"cv": f.cv, "runs": f.runs, "offset_s": offset,
                              "measured_spread": f.measured, "fitted_spread": f.fitted}
        notes += list(f.notes)
    return share, details, notes


def with_sharing(cf: ClusterFile, ranks: list[dict]) -> ClusterFile:
    """``cf`` with ``link.share_cv`` (and ``measurements.sharing``) from the incast records in
    ``ranks``, everything else kept (``sgdnet calibrate --update FILE``)."""
    import dataclasses

    share, details, notes = sharing_figures(ranks, cf.link.latency, cf.link.burst,
                                            cf.link.bandwidth)
    if not share:
        raise CalibrationError("the records hold no concurrent-flow runs with per-flow end "
                               "times (need the 'incast' jobs with k >= 2)")
    meas = dict(cf.measurements)
    meas["sharing"] = details
    link = dataclasses.replace(cf.link, share_cv=share)
    return cf.replace(link=link, measurements=meas,
                      notes=(*cf.notes, *notes, f"link.share_cv {share} measured by the "
                             "concurrent-flow jobs alone (sgdnet calibrate --update)"))


def build_cluster_file(ranks: list[dict], *, name: str = "calibrated",
                       comm_uses_compute: bool | None = None, workers: int | None = None,
                       extra_notes: Sequence[str] = (), reject: float | None = DEFAULT_REJECT
                       ) -> tuple[ClusterFile, dict | None]:
    """Turn the ranks' records of :func:`calibration_jobs` into a cluster file.

    Parameters
    ----------
    ranks : list of dict
        Every rank's record (``rank*.json``), any order.
    comm_uses_compute : bool, optional
        Written into the file. ``None`` (default) decides from the measurements: ``True`` when
        ``(send + receive CPU per byte) x bandwidth >= CPU_BOUND_COMM`` -- the host's CPU is
        busy for most of a transfer's link time (gloo on a fast link, loopback), so
        communication cannot hide behind computation -- else ``False`` (a slow link: the CPU
        works a small fraction of the link time); the decision and its numbers go in the notes.
        Pass ``False`` for NCCL on GPUs.
    workers : int, optional
        Default worker count written into the file (default: world - 1).
    reject : float or None
        Relative residual beyond which a point leaves the link, reduce and update fits (noted;
        ``None``: keep all).

    Returns
    -------
    (ClusterFile, profile dict or None)
        The profile (``ModelProfile.to_dict()``) if the job list had one.
    """
    notes = list(extra_notes)
    sweeps: dict[int, list[float]] = {}
    raw: dict[int, list[float]] = {}
    streams: list[dict] = []
    cpu_recv: list[float] = []
    for part in _job(ranks, "p2p", "p2p"):
        for pair, rec in part.items():
            for s, rtts in rec.get("sweep", {}).items():
                sweeps.setdefault(int(s), []).append(statistics.median(rtts))
                raw.setdefault(int(s), []).extend(rtts)
            for st in rec.get("stream", []):
                if "rtt_s" in st:
                    streams.append({"pair": pair, **st})
                else:
                    cpu_recv.append(st["cpu_s"] / st["bytes"])
    if len(sweeps) < 3 or not streams:
        raise CalibrationError("the records hold no point-to-point sweep/streams (need the "
                               "'p2p' job on at least one pair)")
    sizes = sorted(sweeps)
    rtt = [statistics.median(sweeps[s]) for s in sizes]
    # round trip = 2 alpha + max(0, S - b) / B: the ack's way back is the fitted alpha
    free = fit_link(sizes, rtt, burst=True, reject=reject)
    bws = [(st["bytes"] - free.burst) / max(st["rtt_s"] - free.alpha, 1e-9) for st in streams]
    bw = statistics.median(bws)
    link_fit = fit_link(sizes, rtt, burst=True, bandwidth=bw, reject=reject)
    notes += [f"link (round-trip fit, intercept = 2 alpha): {n}" for n in link_fit.notes]
    alpha = link_fit.alpha / 2
    one_way = [max(r - alpha, 1e-9) for r in rtt]
    resid = {"link.latency": link_fit.max_rel_residual, "link.burst": link_fit.max_rel_residual,
             "link.bandwidth": max(abs(x - bw) / bw for x in bws)}
    alpha_se = _latency_se(raw, link_fit.burst)

    incast: dict[str, Any] = {}
    for direction in ("in", "out"):
        runs = [r for part in _job(ranks, "incast", "incast", f"incast-{direction}")
                for r in part["runs"]]
        if runs:
            ks = [r["k"] for r in runs]
            # one token bucket (the shared link's) lets its burst through at line rate
            gp = [max(r["bytes"] - link_fit.burst, 1.0) / max(r["seconds"] - alpha, 1e-9)
                  for r in runs]
            f = fit_incast(ks, gp, bw)
            incast[direction] = {"table": f.table, "c": f.c, "e1": f.e1}
            resid[f"incast.{direction}.c"] = f.max_rel_residual
            for kk in f.table:
                resid[f"incast.{direction}.{kk}"] = f.max_rel_residual
            notes += [f"incast-{direction}: {n}" for n in f.notes]
    send = [st["cpu_s"] / st["bytes"] for st in streams]
    cpu: dict[str, float] = {"send_s_per_byte": statistics.median(send)}
    resid["cpu.send_s_per_byte"] = _spread(send)
    if cpu_recv:
        cpu["recv_s_per_byte"] = statistics.median(cpu_recv)
        resid["cpu.recv_s_per_byte"] = _spread(cpu_recv)
    ps: dict[str, float] = {}
    local: dict[str, float] = {}
    costs = _job(ranks, "costs", "costs")
    meas_costs = None
    if costs:
        c = costs[0]
        rs = sorted((int(k), v) for k, v in c["reduce_s"].items())
        fr = fit_linear([k for k, _ in rs], [v for _, v in rs], "reduce", reject=reject)
        cpu["reduce_s_per_byte"] = fr.slope
        us = sorted((int(k), v) for k, v in c["update_s"].items())
        fu = fit_linear([k for k, _ in us], [v for _, v in us], "PS update", reject=reject)
        resid.update({"cpu.reduce_s_per_byte": fr.max_rel_residual,
                      "ps.update_s_per_byte": fu.max_rel_residual,
                      "ps.update_s_per_tensor": fu.max_rel_residual})
        ps = {"update_s_per_byte": fu.slope, "update_s_per_tensor": fu.intercept}
        notes += list(fr.notes) + list(fu.notes)
        local[c["model"]] = c["local_step_s"]
        meas_costs = {"reduce_s": dict(rs), "update_s": dict(us),
                      "reduce_fit_max_rel_residual": fr.max_rel_residual,
                      "update_fit_max_rel_residual": fu.max_rel_residual}
    if comm_uses_compute is None:
        comm_uses_compute, why = decide_comm_uses_compute(cpu, bw)
        notes.append(why)
    prof = _job(ranks, "profile", "profile")
    world = max(len(ranks), 2)
    in_table = incast.get("in", {}).get("table")
    share, share_details, share_notes = sharing_figures(ranks, alpha, link_fit.burst, bw)
    notes += share_notes
    for d, det in share_details.items():
        resid[f"link.share_cv.{d}"] = max(
            (abs(det["fitted_spread"][kk] - v) / v for kk, v in det["measured_spread"].items()
             if v > 0), default=0.0)
    link = Link(bandwidth=bw, latency=alpha, burst=link_fit.burst, incast=in_table,
                table=[[s, t] for s, t in zip(sizes, one_way)], share_cv=share or None)
    meas = {"one_way_s": dict(zip(sizes, one_way)), "rtt_s": dict(zip(sizes, rtt)),
            "stream_bandwidth_Bps": bws, "free_fit": {"alpha": free.alpha / 2,
                                                      "bandwidth": free.bandwidth,
                                                      "burst": free.burst},
            "link_fit_max_rel_residual": link_fit.max_rel_residual, "incast": incast,
            "latency_se_s": alpha_se, "residuals": resid,
            "dropped": {"link_bytes": list(link_fit.dropped),
                        "reduce_bytes": list(fr.dropped) if costs else [],
                        "update_bytes": list(fu.dropped) if costs else []}}
    if meas_costs:
        meas["costs"] = meas_costs
    if share_details:
        meas["sharing"] = share_details
    extra = _job(ranks, "profile", "profile_compute_s")
    if extra:
        meas["profile_compute_s"] = extra[0]
        meas["loop_step_s"] = _job(ranks, "profile", "loop_step_s")[0]
    cf = ClusterFile(link=link, name=name, workers=workers or world - 1, ps_hosts=1,
                     comm_uses_compute=comm_uses_compute, cpu=cpu, ps=ps, local_step_s=local,
                     notes=tuple(notes), measurements=meas)
    return cf, (prof[0] if prof else None)


def _spread(xs: Sequence[float]) -> float:
    """Largest ``|x - median| / median`` of direct measurements (0 for one)."""
    m = statistics.median(xs)
    return max(abs(x - m) / m for x in xs) if m > 0 else 0.0


def _latency_se(raw: dict[int, list[float]], burst: float) -> float:
    """Standard error of the fitted one-way latency: the robust spread (1.4826 MAD) of the
    round trips of sizes within the burst (where ``rtt = 2 alpha``), about each size's
    median, over the square root of their number, halved (one way)."""
    dev = [x - statistics.median(v) for s, v in raw.items() if s <= max(burst, 4) and v
           for x in v]
    if len(dev) < 2:
        return 0.0
    mad = statistics.median(abs(d) for d in dev)
    return 1.4826 * mad / len(dev) ** 0.5 / 2


def figures_of(cf: ClusterFile) -> dict[str, float]:
    """The calibrated figures of a cluster file, by name (``link.latency``, ``link.incast.2``,
    ``incast.out.c``, ``cpu.recv_s_per_byte``, ``local_step_s.tb-mlp``, ...): what
    :func:`combine_repeats` gives intervals for."""
    lk = cf.link
    f = {"link.latency": lk.latency, "link.bandwidth": lk.bandwidth, "link.burst": lk.burst}
    for d, inc in cf.measurements.get("incast", {}).items():
        f[f"incast.{d}.c"] = inc["c"]
        f.update({f"incast.{d}.{k}": v for k, v in inc["table"].items()})
    f.update({f"link.share_cv.{d}": v for d, v in (lk.share_cv or {}).items()})
    f.update({f"cpu.{k}": v for k, v in cf.cpu.items()})
    f.update({f"ps.{k}": v for k, v in cf.ps.items()})
    f.update({f"local_step_s.{k}": v for k, v in cf.local_step_s.items()})
    return {k: float(v) for k, v in f.items()}


def combine_repeats(cfs: Sequence[ClusterFile], *, comm_uses_compute: bool | None = None,
                    only: Sequence[str] | None = None, quiet_rows: Sequence[dict] = (),
                    max_rel_ci: float | None = None) -> ClusterFile:
    """One cluster file from the files of ``n`` repeats: every figure the repeats' mean, the
    ``calibration`` block (:func:`.fit.figure_intervals`: value, ``ci95``, ``n``, ``sd``,
    ``worst_rel_residual``) and its verdict (:func:`.fit.judge_quality`, with the quiet gate's
    ``quiet_rows``). ``only``: figure name prefixes to report (``("link.share_cv",)`` for
    ``--update``); the rest of the file is the first repeat's. ``comm_uses_compute``: as
    :func:`build_cluster_file` (``None``: decided again from the mean costs)."""
    import dataclasses

    if not cfs:
        raise CalibrationError("combine_repeats: no repeats to combine")
    figs = [figures_of(c) for c in cfs]
    names = [k for k in figs[0] if all(k in f for f in figs)
             and (only is None or any(k.startswith(p) for p in only))]
    samples = {k: [f[k] for f in figs] for k in names}
    resid = {k: [c.measurements.get("residuals", {}).get(k) for c in cfs] for k in names}
    se = [c.measurements.get("latency_se_s") for c in cfs]
    block = figure_intervals(samples, resid, latency_se=max((x for x in se if x), default=None))
    if only is not None:  # --update: the other figures keep the base file's intervals
        block = {**(cfs[0].calibration.get("figures") or {}), **block}
    verdict = judge_quality(block, quiet_rows, n=len(cfs), **(
        {} if max_rel_ci is None else {"max_rel_ci": max_rel_ci}))
    mean = {k: v["value"] for k, v in block.items()}
    base = cfs[0]
    common = set.intersection(*(set(c.notes) for c in cfs))
    notes = list(dict.fromkeys((n if n in common else f"repeat {i}: {n}") for i, c in
                               enumerate(cfs) for n in c.notes if "comm_uses_compute" not in n))
    if len(cfs) > 1:
        notes = [f"{len(cfs)} repeats: every figure is their mean; intervals in 'calibration'"
                 ] + notes
    lk = base.link
    inc = {k: mean.get(f"incast.in.{k}", v) for k, v in (lk.incast or {}).items()} or None
    share = {d: mean.get(f"link.share_cv.{d}", v) for d, v in (lk.share_cv or {}).items()}
    table = None
    if only is None and all(c.link.table for c in cfs):
        rows = [dict(c.link.table) for c in cfs]
        table = [[s, statistics.fmean(r[s] for r in rows)] for s in rows[0]
                 if all(s in r for r in rows)]
    link = dataclasses.replace(
        lk, latency=mean.get("link.latency", lk.latency),
        bandwidth=mean.get("link.bandwidth", lk.bandwidth), burst=mean.get("link.burst", lk.burst),
        incast=inc, share_cv=share or None, table=table or lk.table)
    cpu = {k: mean.get(f"cpu.{k}", v) for k, v in base.cpu.items()}
    ps = {k: mean.get(f"ps.{k}", v) for k, v in base.ps.items()}
    local = {k: mean.get(f"local_step_s.{k}", v) for k, v in base.local_step_s.items()}
    cuc = base.comm_uses_compute
    if only is None:
        if comm_uses_compute is None:
            cuc, why = decide_comm_uses_compute(cpu, link.bandwidth)
            notes.append(why)
        else:
            cuc = comm_uses_compute
    meas = dict(base.measurements)
    if len(cfs) > 1 and only is not None:
        meas["sharing_repeats"] = [c.measurements.get("sharing") for c in cfs]
    elif len(cfs) > 1:
        meas["repeats"] = [dict(c.measurements) for c in cfs]
        for d in ("in", "out"):
            if d in meas.get("incast", {}):
                m = meas["incast"] = dict(meas["incast"])
                m[d] = {**m[d], "c": mean.get(f"incast.{d}.c", m[d]["c"]),
                        "table": {k: mean.get(f"incast.{d}.{k}", v)
                                  for k, v in m[d]["table"].items()}}
    cal = {"repeats": len(cfs), **verdict, "figures": block}
    return base.replace(link=link, cpu=cpu, ps=ps, local_step_s=local, comm_uses_compute=cuc,
                        notes=tuple(notes), measurements=meas, calibration=cal)


#: Comments :func:`save_cluster_file` writes above the sections calibrate measured with its
#: own code rather than the user's training.
_OWN_MODEL = {
    "ps:": "# ps: the update cost of calibrate's own update function (sgdnet.testbed.ops) on "
           "the PS host;\n# replace it with your PS's measured update (or run calibrate with "
           "--profile FILE).\n",
    "local_step_s:": "# local_step_s: calibrate's own model (sgdnet.testbed.models), not "
                     "yours; predictions take\n# the step from your profile (--model "
                     "profile.json); --profile FILE writes yours here.\n",
}


def save_cluster_file(cf: ClusterFile, path: str | Path) -> Path:
    """``cf.save(path)`` plus the comments of :data:`_OWN_MODEL` above the ``ps`` and
    ``local_step_s`` sections unless they came from the user's profile (``--profile``)."""
    p = cf.save(path)
    mine = cf.measurements.get("from_profile", {})
    out = []
    for ln in p.read_text().splitlines(keepends=True):
        key = ln.split(" ", 1)[0]
        if key in _OWN_MODEL and not mine.get(key.rstrip(":")):
            out.append(_OWN_MODEL[key])
        out.append(ln)
    p.write_text("".join(out))
    return p


def with_profile(cf: ClusterFile, profile: Any) -> ClusterFile:
    """``cf`` with the local step (``profile.step_s``, by the profile's name) and, when the
    profile timed its optimizer, the PS update cost per byte (``update_s / grad_bytes``, per
    tensor 0) taken from a :class:`~sgdnet.workload.ModelProfile` (the user's own model)
    instead of calibrate's own, noted."""
    ps = dict(cf.ps)
    notes = [f"local_step_s.{profile.name} = {profile.step_s:.4g} s from the profile "
             f"(replaces calibrate's own model {list(cf.local_step_s)})"]
    if profile.update_s > 0 and profile.grad_bytes > 0:
        ps = {"update_s_per_byte": profile.update_s / profile.grad_bytes,
              "update_s_per_tensor": 0.0}
        notes.append(f"ps update from the profile's optimizer step ({profile.update_s:.4g} s "
                     f"over {profile.grad_bytes:.0f} bytes) instead of calibrate's own")
    else:
        notes.append("the profile has no optimizer time: ps update is calibrate's own")
    cal = dict(cf.calibration)
    if cal.get("figures"):
        cal["figures"] = {k: v for k, v in cal["figures"].items()
                          if not k.startswith("local_step_s.")
                          and not (k.startswith("ps.") and ps != cf.ps)}
    mine = {"name": profile.name, "local_step_s": True, "ps": ps != cf.ps}
    return cf.replace(local_step_s={profile.name: profile.step_s}, ps=ps,
                      notes=(*cf.notes, *notes), calibration=cal,
                      measurements={**cf.measurements, "from_profile": mine})


def _gradient_bytes(profile: Any) -> list[int] | None:
    """A profile's gradients' bytes in the order backward pushes them (its last layer's
    first), for the PS probe; None without a profile."""
    if profile is None:
        return None
    from ..workload import ModelProfile

    p = profile if isinstance(profile, ModelProfile) else ModelProfile.load(profile)
    return [int(round(float(ly.grad_bytes))) for ly in reversed(p.layers)
            if float(ly.grad_bytes) > 0]


def calibrate_testbed(*, workers: int = 4, rate: str | float = "100Mbit/s",
                      burst: str | float = "64KB", delay: str | float = 0.0,
                      queue: str | float = "100ms", model: str = "tb-mlp", batch: int = 32,
                      out: str | Path | None = None, profile_out: str | Path | None = None,
                      timeout_s: float | None = None, comm_uses_compute: bool | None = None,
                      records_out: str | Path | None = None,
                      update: str | Path | None = None, repeats: int = DEFAULT_REPEATS,
                      threshold_cores: float | None = None, reject: float | None = DEFAULT_REJECT,
                      max_rel_ci: float | None = None, profile: Any = None,
                      ps_probe: bool = False,
                      log: Callable[[str], None] = print, **job_kw: Any) -> ClusterFile:
    """Calibrate the emulated cluster (``workers`` + 1 hosts, every link at ``rate``).

    Writes the cluster file to ``out``, the single-worker profile to ``profile_out`` and every
    rank's raw record (a JSON list) to ``records_out`` when given; returns the cluster file.
    The job list runs ``repeats`` times (interleaved, one launch); the file holds the means and,
    in its ``calibration`` block, each figure's 95 % interval and the verdict
    (``calibration.quality``: ``good`` or ``low``, with ``problems``; low when an interval is
    too wide, a fit dropped many points, or the quiet gate flagged a job, with the advice
    :func:`.quiet.advice` also logged). The file's ``measurements`` also record the shaping asked
    for (``tbf_rate_Bps``, ``tbf_burst_B``, ``tbf_queue_s``) and what tc reports (``qdisc``).
    ``burst``: bytes or a size, ``KB`` = 1000 B, ``KiB`` = 1024 B (tc's ``kb``; a lowercase
    ``kb`` is refused as ambiguous, :func:`.netns.parse_burst`); ``queue``: tbf ``latency``, how
    long a packet may wait in the shaper. ``profile``: a ModelProfile (or its JSON path) whose
    step and optimizer time replace calibrate's own (:func:`with_profile`). ``update``: an
    existing cluster file; only the concurrent-flow jobs run and only their sharing figures
    (:func:`with_sharing`) change in it (written to ``out``, default ``update`` itself).
    ``ps_probe``: also the PS-traffic probe (:func:`.ps_efficiency.probe_cells`: the
    ``profile``'s gradients, else calibrate's own model's, pushed into host 0 and pulled back by
    2..``workers`` hosts, sync and async, twice) and the PS downlink efficiency fitted to it
    with the file's token bucket (:func:`.ps_efficiency.fit`, ``link.ps_efficiency``; predict
    with ``Cluster.from_file(..., burst="file")``); a few minutes more.
    """
    from .. import units
    from . import quiet, tcp_probe
    from .netns import EmulatedCluster, parse_burst
    from .runner import launch, summarize_job

    if workers < 1:
        raise CalibrationError(f"workers={workers}: need at least 1 worker (plus the PS host)")
    if ps_probe and (update is not None or workers < 2):
        raise CalibrationError("ps_probe (--ps-probe) needs a full calibration with workers >= 2 "
                               f"(got workers={workers}{', update' if update is not None else ''}"
                               "): drop --update, or give --workers 2 or more")
    bps = units.bandwidth(rate, what="rate")
    burst_b = parse_burst(burst)
    thr = quiet.DEFAULT_THRESHOLD_CORES if threshold_cores is None else float(threshold_cores)
    gap = max(0.02, 3 * burst_b / bps)
    if update is not None:
        job_kw = {**job_kw, "only": ("incast",), "profile": False}
    jobs = calibration_jobs(workers + 1, model=model, batch=batch, gap_s=gap, repeats=repeats,
                            **job_kw)
    before = quiet.sample_other_cores()
    if before > thr:
        log(quiet.advice(before, thr, when="before the start"))
    with EmulatedCluster(workers + 1, rate=bps, burst=burst_b, delay=delay,
                         queue_latency=queue) as cl:
        log(f"calibrating {cl!r} ({len(jobs)} jobs, {repeats} repeat(s))")
        res = launch(cl, workers + 1, jobs, timeout_s=timeout_s or 300.0 + 200.0 * repeats)
        qd = cl.qdisc_stats()
        tcp = None if update is not None else tcp_probe.probe_cluster(cl, flows=workers)
        ps_runs, ps_layers = None, None
        if ps_probe:  # (checked above: a full calibration, workers >= 2)
            from .ps_efficiency import probe_cells

            ps_layers = _gradient_bytes(profile) or list(tcp_probe.PS_LAYERS)
            ps_runs = probe_cells(cl, ps_layers, range(2, workers + 1), repeats=repeats,
                                  log=log)
    if records_out is not None:  # the raw records: a later derivation can start from them
        import json

        Path(records_out).write_text(json.dumps(res["ranks"]))
        log(f"raw records -> {records_out} (sgdnet calibrate --from-records reads a directory "
            "of rank*.json; this file holds the same list)")
    quiet_rows = [summarize_job(res["ranks"], i, threshold_cores=thr) for i in range(len(jobs))]
    qrows = [{k: r[k] for k in ("id", "wall_s", "own_cores", "other_cores", "irq_cores",
                                "noisy")} for r in quiet_rows]
    noisy = [r for r in qrows if r["noisy"]]
    if noisy:
        log(quiet.advice(max(r["other_cores"] for r in noisy), thr, jobs=[r["id"] for r in noisy],
                         top=res["top_others"]))
    per_rep = split_repeats(res["ranks"])
    if update is not None:
        from ..workload.cluster_file import load_cluster_file

        base = load_cluster_file(update)
        cf = combine_repeats([with_sharing(base, rk) for rk in per_rep], only=("link.share_cv",),
                             quiet_rows=qrows, max_rel_ci=max_rel_ci)
        meas = dict(cf.measurements)
        meas["sharing"] = {**meas["sharing"], "measured_at": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "quiet": qrows, "top_others": res["top_others"]}
        cf = cf.replace(measurements=meas)
        dest = out if out is not None else update
        save_cluster_file(cf, dest)
        log(f"cluster file -> {dest} (link.share_cv {dict(cf.link.share_cv or {})})")
        return cf
    built = [build_cluster_file(rk, name=f"testbed-{bps * 8 / 1e6:g}mbit", workers=workers,
                                comm_uses_compute=comm_uses_compute, reject=reject)
             for rk in per_rep]
    prof = next((p for _, p in built if p is not None), None)
    cf = combine_repeats([c for c, _ in built], comm_uses_compute=comm_uses_compute,
                         quiet_rows=qrows, max_rel_ci=max_rel_ci)
    meas = dict(cf.measurements)
    meas.update({"tbf_rate_Bps": bps, "tbf_burst_B": burst_b, "delay_s": cl.delay,
                 "tbf_queue_s": cl.queue_latency, "quiet": qrows,
                 "quiet_before_cores": before, "top_others": res["top_others"], "qdisc": qd})
    if prof is not None:
        meas["profile"] = prof
    notes = list(cf.notes)
    if noisy:
        notes.append(f"quiet gate: other processes used up to "
                     f"{max(r['other_cores'] for r in noisy):.2f} cores (threshold {thr:g}) "
                     f"during {[r['id'] for r in noisy]}")
    cf = cf.replace(measurements=meas, notes=tuple(notes))
    cf = tcp_probe.with_probe(cf, tcp)  # link.tcp_pacing, measurements.tcp (issue #37)
    if profile is not None:
        from ..workload import ModelProfile

        cf = with_profile(cf, profile if isinstance(profile, ModelProfile)
                          else ModelProfile.load(profile))
    if ps_runs is not None:
        from .ps_efficiency import fit_repeats, with_ps_efficiency

        table, figs, per = fit_repeats(ps_runs, ps_layers, 0.002, cf, burst=True, log=log)
        cf = with_ps_efficiency(cf, table, figures=figs, quiet_rows=qrows,
                                max_rel_ci=max_rel_ci, probe="sgdnet calibrate --ps-probe",
                                burst=True, layers_B=list(ps_layers), rates_Bps=[bps],
                                per_repeat=per, runs=ps_runs)
    if out is not None:
        save_cluster_file(cf, out)
        log(f"cluster file -> {out}")
    if profile_out is not None and prof is not None:
        from ..workload import ModelProfile

        ModelProfile.from_dict(prof).save(profile_out)
        log(f"profile -> {profile_out}")
    return cf
