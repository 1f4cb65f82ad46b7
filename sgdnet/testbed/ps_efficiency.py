"""A PS host's downlink efficiency under the PS's own traffic, from the PS-traffic probe (#37).

:func:`~sgdnet.testbed.tcp_probe.probe_ps` pushes a model's layers from ``n`` hosts into a PS
host and pulls them back (no torch, no gloo). With BBR on the emulated testbed its PS link
carries 0.82-0.90 of its bound where max-min sharing fills it, for no cause found
(docs/validation.md). :func:`fit` turns such runs into ``Cluster.ps_link_efficiency`` (cluster
file ``link.ps_efficiency``): for ``k`` = 2, 3, ... in turn, the downlink efficiency with ``k``
flows (``e_1`` = 1; the counts above ``k`` at ``e_k`` while it is fitted) that minimises the
squared relative error of the model's sync and async cells with ``k`` workers, on a grid of
0.05 over [0.5, 1] then 0.01 around the best. :func:`probe_cells` measures the runs on an
emulated cluster, :func:`predict_cell` the model of one of them; :func:`with_ps_efficiency`
writes the table into a cluster file. :func:`fit_repeats` fits every repeat of the probe on
its own as well, so the file states each efficiency with a 95 % interval over the repeats
(``calibration.figures["link.ps_efficiency.k"]``), judged like the calibration's other figures
(:func:`.fit.judge_quality`: a half-width above 0.05 of the link makes it low quality).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import TestbedError

__all__ = ["probe_cells", "predict_cell", "fit", "fit_repeats", "split_repeats",
           "with_ps_efficiency", "probe_profile", "bandwidth_at"]


def probe_profile(layers_B: Sequence[float], compute_s: float) -> Any:
    """The probe's pattern as a profile: layers in forward order (the probe pushes them in the
    order given, as backward does), the compute sleep before layer 0, 1 us of backward each
    (so the pushes are posted one after another in the probe's order)."""
    from ..workload import Layer, ModelProfile

    fwd = list(reversed(layers_B))
    return ModelProfile("probe-ps", [Layer(f"l{i}", compute_s if i == 0 else 0.0, 1e-6, float(b))
                                     for i, b in enumerate(fwd)],
                        batch_size=1, device="sleep", source="sgdnet.testbed.tcp_probe.probe_ps")


def probe_cells(cluster: Any, layers: Sequence[int], workers: Sequence[int], repeats: int = 2,
                log: Callable[[str], None] = print, full: bool = False,
                into: dict[str, list[dict]] | None = None) -> dict[str, list[dict]]:
    """``probe_ps`` on ``cluster`` (at its current rate), sync then async, for every worker
    count, ``repeats`` times (interleaved): ``{"rate/mode/n": [record, ...]}`` (added to
    ``into`` when given), each record ``probe_ps``'s whole with ``full``, else its summary."""
    from . import tcp_probe

    got: dict[str, list[dict]] = {} if into is None else into
    for _ in range(repeats):
        for sync in (True, False):
            for n in workers:
                d = tcp_probe.probe_ps(cluster, n, sync, layers=tuple(int(b) for b in layers))
                mode = "sync" if sync else "async"
                got.setdefault(f"{round(cluster.rate)}/{mode}/{n}", []).append(
                    d if full else {k: d[k] for k in ("workers", "sync", "steps_per_s",
                                                      "of_bound", "per_worker")})
                log(f"{cluster.rate * 8e-6:.0f} Mbit/s {mode} n={n}: {d['steps_per_s']:.2f} "
                    f"steps/s ({d['of_bound']:.3f} of the PS link's bound)")
    return got


def bandwidth_at(cluster_file: Any, rate_Bps: float) -> float:
    """The sustained bandwidth of an emulated link shaped at ``rate_Bps``: the rate times the
    calibration file's sustained / tbf ratio (TCP/IP payload per frame, which does not depend
    on the rate).

    Raises
    ------
    TestbedError
        A file without ``measurements.tbf_rate_Bps`` (not an emulated cluster's calibration).
    """
    tbf = (cluster_file.measurements or {}).get("tbf_rate_Bps")
    if not tbf:
        raise TestbedError("the cluster file has no measurements.tbf_rate_Bps (an emulated "
                           "cluster's calibration); give a testbed calibration file")
    return rate_Bps * (cluster_file.link.bandwidth / float(tbf))


def predict_cell(cluster_file: Any, profile: Any, mode: str, workers: int, rate_Bps: float, *,
                 sim_steps: int = 200, replications: int = 3, cpu: bool = False,
                 **overrides: Any) -> float:
    """The model's rounds per second of one probe cell: ``profile`` (:func:`probe_profile`)
    under ``{mode}-ps`` on ``Cluster.from_file(cluster_file, workers=workers,
    bandwidth=bandwidth_at(cluster_file, rate_Bps))`` with no PS update cost and, unless
    ``cpu``, no per-byte CPU cost (the probe's sockets copy in the kernel only), ``overrides``
    last.

    Raises
    ------
    TestbedError
        A file without ``measurements.tbf_rate_Bps``.
    """
    from ..prediction import predict
    from ..workload import Cluster

    kw: dict[str, Any] = dict(workers=workers, bandwidth=bandwidth_at(cluster_file, rate_Bps),
                              update_s_per_byte=0.0, update_s_per_layer=0.0)
    if not cpu:
        kw.update(send_s_per_byte=0.0, recv_s_per_byte=0.0, reduce_s_per_byte=0.0)
    c = Cluster(**cluster_file.cluster_kwargs(**{**kw, **overrides}))
    p = predict(f"{mode}-ps", profile, c, steps=sim_steps, warmup=max(10, sim_steps // 10),
                replications=replications, seed=0)
    return float(p.steps_per_s.mean)


def fit(runs: Mapping[str, Sequence[Mapping[str, Any]]], layers_B: Sequence[float],
        compute_s: float, cluster_file: Any, *, burst: bool = True, sim_steps: int = 200,
        replications: int = 3, lo: float = 0.5,
        log: Callable[[str], None] = print) -> tuple[dict[int, float], dict[int, float]]:
    """The efficiency table ``{1: 1.0, 2: e_2, ...}`` that makes the model reproduce ``runs``
    (``{"rate/mode/n": [{"steps_per_s": ...}, ...]}``, :func:`probe_cells`), and each fitted
    count's rms relative error. The model of a cell: :func:`predict_cell`, with the file's
    token bucket when ``burst``.

    Raises
    ------
    TestbedError
        No cell with two or more workers, or a file without ``measurements.tbf_rate_Bps``.
    """
    prof = probe_profile(layers_B, compute_s)
    cells: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for key, rs in runs.items():
        rate, mode, n = key.split("/")
        cells.setdefault((mode, int(n)), []).append(
            (float(rate), statistics.median(float(r["steps_per_s"]) for r in rs)))
    ks = sorted({n for _, n in cells if n >= 2})
    if not ks:
        raise TestbedError("no PS probe cells with 2 or more workers to fit the efficiency to")
    extra = {"burst": "file"} if burst else {}

    def err2(eff: list[float], k: int) -> float:
        return sum((predict_cell(cluster_file, prof, mode, k, rate, sim_steps=sim_steps,
                                 replications=replications, ps_link_efficiency=tuple(eff),
                                 **extra) / meas - 1.0) ** 2
                   for mode in ("sync", "async") for rate, meas in cells.get((mode, k), []))

    eff, rms = [1.0], {}
    for k in ks:
        def score(e: float, k: int = k, base: tuple[float, ...] = tuple(eff)) -> float:
            return err2([*base, *[e] * (k - len(base))], k)
        coarse = min((score(lo + 0.05 * i), lo + 0.05 * i)
                     for i in range(int(round((1.0 - lo) / 0.05)) + 1))
        a, b = max(lo, coarse[1] - 0.04), min(1.0, coarse[1] + 0.04)
        best = min([coarse] + [(score(a + 0.01 * i), a + 0.01 * i)
                               for i in range(int(round((b - a) / 0.01)) + 1)])
        eff += [round(best[1], 2)] * (k - len(eff))
        n = sum(len(cells.get((m, k), [])) for m in ("sync", "async"))
        rms[k] = (best[0] / n) ** 0.5
        log(f"{k} flows: PS downlink efficiency {best[1]:.2f} (rms relative error of its {n} "
            f"cells {rms[k]:.1%})")
    return {i + 1: e for i, e in enumerate(eff)}, rms


def split_repeats(runs: Mapping[str, Sequence[Mapping[str, Any]]]
                  ) -> list[dict[str, list[Mapping[str, Any]]]]:
    """``runs`` (every cell's records in the order measured, :func:`probe_cells` interleaving
    the repeats) as one run dict per repeat: repeat ``i`` holds the ``i``-th record of every
    cell that has one."""
    n = max((len(rs) for rs in runs.values()), default=0)
    return [{k: [rs[i]] for k, rs in runs.items() if len(rs) > i} for i in range(n)]


def fit_repeats(runs: Mapping[str, Sequence[Mapping[str, Any]]], layers_B: Sequence[float],
                compute_s: float, cluster_file: Any, *, log: Callable[[str], None] = print,
                **kw: Any) -> tuple[dict[int, float], dict[str, dict], list[dict[int, float]]]:
    """:func:`fit` on each repeat of ``runs`` (:func:`split_repeats`) and their intervals.

    Returns ``(table, figures, per_repeat)``: ``table`` the repeats' mean efficiency for each
    flow count (rounded to 0.01; one repeat: its fit), ``figures`` the calibration entries
    ``{"link.ps_efficiency.k": {"value", "ci95", "n", "sd", "worst_rel_residual"}}``
    (:func:`.fit.figure_intervals`; the residual is the worst repeat's rms relative error of
    its cells) and ``per_repeat`` each repeat's table. ``kw``: :func:`fit`'s options.
    """
    from .fit import figure_intervals

    reps = split_repeats(runs)
    per, rms = [], []
    for i, r in enumerate(reps):
        t, e = fit(r, layers_B, compute_s, cluster_file, log=lambda m, i=i: log(
            f"repeat {i}: {m}"), **kw)
        per.append(t)
        rms.append(e)
    ks = sorted(k for k in per[0] if k >= 2)
    figs = figure_intervals({f"link.ps_efficiency.{k}": [t[k] for t in per] for k in ks},
                            {f"link.ps_efficiency.{k}": [e.get(k) for e in rms] for k in ks})
    table = {1: 1.0, **{k: round(figs[f"link.ps_efficiency.{k}"]["value"], 2) for k in ks}}
    for k in ks:
        f = figs[f"link.ps_efficiency.{k}"]
        ci = f["ci95"]
        log(f"{k} flows: PS downlink efficiency {f['value']:.2f}"
            + (f" [{ci[0]:.2f} .. {ci[1]:.2f}] over {f['n']} repeats" if ci else
               " (one repeat: no interval)"))
    return table, figs, per


def with_ps_efficiency(cf: Any, table: Mapping[int, float], *,
                       figures: Mapping[str, dict] | None = None,
                       quiet_rows: Sequence[Mapping[str, Any]] | None = None,
                       max_rel_ci: float | None = None, **record: Any) -> Any:
    """``cf`` with ``link.ps_efficiency = table`` and ``measurements.ps_efficiency`` (the table
    and ``record``: the probe's source, rates, whether the token bucket was on, the errors).

    ``figures`` (:func:`fit_repeats`): added to ``cf.calibration["figures"]`` and the
    calibration judged again with them (:func:`.fit.judge_quality`, the quiet gate's
    ``quiet_rows``, default the file's own ``measurements.quiet``, and the file's repeat
    count), so an efficiency the repeats do not pin down makes the file low quality as any
    other figure does."""
    import dataclasses

    from .fit import judge_quality

    meas = dict(cf.measurements or {})
    meas["ps_efficiency"] = {**record, "table": dict(table)}
    out = dataclasses.replace(cf, link=dataclasses.replace(cf.link, ps_efficiency=dict(table)),
                              measurements=meas)
    if figures is None:
        return out
    cal = dict(cf.calibration or {})
    block = {**(cal.get("figures") or {}), **figures}
    if quiet_rows is None:
        quiet_rows = (cf.measurements or {}).get("quiet") or ()
    verdict = judge_quality(block, list(quiet_rows), n=int(cal.get("repeats", 1)),
                            **({} if max_rel_ci is None else {"max_rel_ci": max_rel_ci}))
    return dataclasses.replace(out, calibration={**cal, **verdict, "figures": block})
