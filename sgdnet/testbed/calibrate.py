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

* one-way time of ``S`` bytes = round trip of (``S`` bytes, 4-byte ack) minus half the round
  trip of the smallest size (the ack's way back); per size the median over repeats, pooled
  over the measured pairs;
* sustained bandwidth ``B`` = streamed bytes (minus the burst) / (stream round trip - smallest
  round trip), median over streams and pairs; then ``alpha`` and the token-bucket burst by
  :func:`.fit.fit_link` with ``B`` fixed (a negative ``alpha`` is clamped to 0 and noted);
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
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CalibrationError
from ..workload.cluster_file import ClusterFile, Link
from .fit import fit_incast, fit_linear, fit_link, fit_share_cv

__all__ = ["calibration_jobs", "build_cluster_file", "calibrate_testbed", "SWEEP_SIZES",
           "decide_comm_uses_compute", "CPU_BOUND_COMM", "sharing_figures", "with_sharing"]

#: Message sizes of the point-to-point sweep, bytes.
SWEEP_SIZES = (4, 1024, 8192, 32768, 65536, 131072, 262144, 524288, 1048576, 2097152)


def calibration_jobs(world: int, *, model: str = "tb-mlp", batch: int = 32,
                     sizes: Sequence[int] = SWEEP_SIZES, reps: int = 5, gap_s: float = 0.03,
                     stream_msgs: int = 8, stream_msg_bytes: int = 1 << 20,
                     incast_bytes: int = 1 << 20, incast_reps: int = 10,
                     profile: bool = True, only: Sequence[str] | None = None) -> list[dict]:
    """The calibration's job list for a group of ``world`` hosts (rank 0 = the PS host).

    ``gap_s`` must let a token bucket refill between sweep messages (burst / rate).
    ``only``: keep the jobs of these kinds (e.g. ``("incast",)`` for the sharing figures).
    """
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
    if profile:
        jobs.append({"kind": "profile", "id": "profile", "model": model, "batch": batch,
                     "rank": 1})
    if only is not None:
        jobs = [j for j in jobs if j["kind"] in set(only)]
    return jobs


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
                       extra_notes: Sequence[str] = ()) -> tuple[ClusterFile, dict | None]:
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

    Returns
    -------
    (ClusterFile, profile dict or None)
        The profile (``ModelProfile.to_dict()``) if the job list had one.
    """
    notes = list(extra_notes)
    sweeps: dict[int, list[float]] = {}
    streams: list[dict] = []
    cpu_recv: list[float] = []
    for part in _job(ranks, "p2p", "p2p"):
        for pair, rec in part.items():
            for s, rtts in rec.get("sweep", {}).items():
                sweeps.setdefault(int(s), []).append(statistics.median(rtts))
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
    back = rtt[0] / 2  # the 4-byte ack's way back (smallest message's half round trip)
    one_way = [max(r - back, 1e-9) for r in rtt]
    free = fit_link(sizes, one_way, burst=True)
    b0 = free.burst
    bws = [(st["bytes"] - b0) / max(st["rtt_s"] - rtt[0], 1e-9) for st in streams]
    bw = statistics.median(bws)
    link_fit = fit_link(sizes, one_way, burst=True, bandwidth=bw)
    notes += [f"link: {n}" for n in link_fit.notes]
    alpha = link_fit.alpha

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
            notes += [f"incast-{direction}: {n}" for n in f.notes]
    cpu: dict[str, float] = {
        "send_s_per_byte": statistics.median(st["cpu_s"] / st["bytes"] for st in streams)}
    if cpu_recv:
        cpu["recv_s_per_byte"] = statistics.median(cpu_recv)
    ps: dict[str, float] = {}
    local: dict[str, float] = {}
    costs = _job(ranks, "costs", "costs")
    meas_costs = None
    if costs:
        c = costs[0]
        rs = sorted((int(k), v) for k, v in c["reduce_s"].items())
        fr = fit_linear([k for k, _ in rs], [v for _, v in rs], "reduce")
        cpu["reduce_s_per_byte"] = fr.slope
        us = sorted((int(k), v) for k, v in c["update_s"].items())
        fu = fit_linear([k for k, _ in us], [v for _, v in us], "PS update")
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
    link = Link(bandwidth=bw, latency=alpha, burst=link_fit.burst, incast=in_table,
                table=[[s, t] for s, t in zip(sizes, one_way)], share_cv=share or None)
    meas = {"one_way_s": dict(zip(sizes, one_way)), "rtt_s": dict(zip(sizes, rtt)),
            "stream_bandwidth_Bps": bws, "free_fit": {"alpha": free.alpha,
                                                      "bandwidth": free.bandwidth,
                                                      "burst": free.burst},
            "link_fit_max_rel_residual": link_fit.max_rel_residual, "incast": incast}
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


def calibrate_testbed(*, workers: int = 4, rate: str | float = "100Mbit/s",
                      burst: str | float = "64KB", delay: str | float = 0.0,
                      model: str = "tb-mlp", batch: int = 32, out: str | Path | None = None,
                      profile_out: str | Path | None = None, timeout_s: float = 600.0,
                      comm_uses_compute: bool | None = None,
                      records_out: str | Path | None = None,
                      update: str | Path | None = None,
                      log: Callable[[str], None] = print, **job_kw: Any) -> ClusterFile:
    """Calibrate the emulated cluster (``workers`` + 1 hosts, every link at ``rate``).

    Writes the cluster file to ``out``, the single-worker profile to ``profile_out`` and every
    rank's raw record (a JSON list) to ``records_out`` when given; returns the cluster file.
    The file's ``measurements`` also record the link shaping asked for (``tbf_rate_Bps``,
    ``tbf_burst_B``) next to what was measured. ``update``: an existing cluster file; only the
    concurrent-flow jobs run and only their sharing figures (:func:`with_sharing`) change in
    it (written to ``out``, default ``update`` itself).
    """
    from .. import units
    from .netns import EmulatedCluster
    from .runner import launch

    if workers < 1:
        raise CalibrationError(f"workers={workers}: need at least 1 worker (plus the PS host)")
    bps = units.bandwidth(rate, what="rate")
    burst_b = units.nbytes(burst, what="burst")
    gap = max(0.02, 3 * burst_b / bps)
    if update is not None:
        job_kw = {**job_kw, "only": ("incast",), "profile": False}
    jobs = calibration_jobs(workers + 1, model=model, batch=batch, gap_s=gap, **job_kw)
    with EmulatedCluster(workers + 1, rate=bps, burst=burst_b, delay=delay) as cl:
        log(f"calibrating {cl!r} ({len(jobs)} jobs)")
        res = launch(cl, workers + 1, jobs, timeout_s=timeout_s)
        qd = cl.qdisc_stats()
    from .runner import summarize_job

    if records_out is not None:  # the raw records: a later derivation can start from them
        import json

        Path(records_out).write_text(json.dumps(res["ranks"]))
        log(f"raw records -> {records_out} (sgdnet calibrate --from-records reads a directory "
            "of rank*.json; this file holds the same list)")
    quiet_rows = [summarize_job(res["ranks"], i) for i in range(len(jobs))]
    if update is not None:
        from ..workload.cluster_file import load_cluster_file

        cf = with_sharing(load_cluster_file(update), res["ranks"])
        meas = dict(cf.measurements)
        meas["sharing"] = {**meas["sharing"], "measured_at": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "quiet": [
            {k: r[k] for k in ("id", "wall_s", "own_cores", "other_cores", "irq_cores",
                               "noisy")} for r in quiet_rows], "top_others": res["top_others"]}
        cf = cf.replace(measurements=meas)
        cf.save(out if out is not None else update)
        log(f"cluster file -> {out if out is not None else update} (link.share_cv "
            f"{dict(cf.link.share_cv or {})})")
        return cf
    cf, prof = build_cluster_file(res["ranks"], name=f"testbed-{bps * 8 / 1e6:g}mbit",
                                  workers=workers, comm_uses_compute=comm_uses_compute)
    meas = dict(cf.measurements)
    meas.update({"tbf_rate_Bps": bps, "tbf_burst_B": burst_b, "delay_s": delay,
                 "quiet": [{k: r[k] for k in ("id", "wall_s", "own_cores", "other_cores",
                                              "irq_cores", "noisy")} for r in quiet_rows],
                 "top_others": res["top_others"], "qdisc": qd})
    if prof is not None:
        meas["profile"] = prof
    notes = list(cf.notes)
    noisy = [r["id"] for r in quiet_rows if r["noisy"]]
    if noisy:
        notes.append(f"quiet gate: other tenants used more than the threshold during {noisy}")
    cf = cf.replace(measurements=meas, notes=tuple(notes))
    if out is not None:
        cf.save(out)
        log(f"cluster file -> {out}")
    if profile_out is not None and prof is not None:
        from ..workload import ModelProfile

        ModelProfile.from_dict(prof).save(profile_out)
        log(f"profile -> {profile_out}")
    return cf
