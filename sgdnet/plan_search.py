"""The fastest 3D-parallel plan that fits memory (``sgdnet plan``).

:func:`enumerate_plans` lists the valid plans of a model on a cluster's GPUs: a tensor-parallel
degree ``tp`` dividing the GPUs per node (a TP group inside one node on NVLink, Megatron-LM's
placement; 1 on a cluster without a topology), a pipeline depth ``pp`` dividing the transformer
blocks (the layers of a profile without blocks), so that every stage gets as many blocks,
``dp = GPUs / (tp pp)`` data-parallel replicas (plans whose ``tp pp`` does not divide the GPUs
are skipped), and ``m`` micro-batches per iteration: those given, or the ``global_batch``'s
``B / (dp b)`` (plans where it is not an integer are skipped), or the ``pipeline`` variant's
default (``4 pp``, 1 without pipelining). The interleaved schedule also needs ``pp >= 2``,
``pp v`` dividing the blocks and ``m`` a multiple of ``pp`` (Megatron-LM's rule). Without
pipelining the schedules are the same, so a ``pp = 1`` plan is listed once.

:func:`best_plans` computes each plan's memory per GPU (its stage that needs the most,
:func:`sgdnet.workload.parallelism.memory_for_plan`), refuses those that do not fit the device
(flagged ``fits=False``, never simulated), predicts the others with :func:`sgdnet.predict`
(coarse nets by default: the schedule's passes with closed-form communication) and sorts them
by samples/s; the first plan that fits is the fastest (``PlanStudy.best``). Each row carries
the closed-form bubble ``(p - 1) / (v m + p - 1)`` (equal stages, free communication), the
measured idle fraction, model TFLOP/s per GPU and MFU (:func:`sgdnet.pipeline_report`).

Narayanan et al. 2021 (SC'21, arXiv:2104.04473, §3, Takeaways #1 and #2) state the
heuristics such a search should rediscover: TP up to the GPUs of a node, PP across nodes, DP
over the rest; and §2.2: a larger ``m`` shrinks the bubble.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import SgdnetError, VariantError

__all__ = ["PlanStudy", "enumerate_plans", "best_plans", "format_plans", "plan_from_args",
           "plan_cluster"]


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _ints(value: Any, what: str) -> list[int] | None:
    """A list of positive integers from a list, an int or ``"1,2,4"`` (None stays None)."""
    if value is None:
        return None
    items: Iterable[Any]
    if isinstance(value, str):
        items = [v for v in value.replace(" ", ",").split(",") if v]
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    else:
        items = value
    out = []
    for v in items:
        try:
            k = int(v)
        except (TypeError, ValueError):
            k = 0
        if isinstance(v, bool) or k < 1 or (isinstance(v, float) and not v.is_integer()):
            raise VariantError(f"{what}={value!r}: give positive integers, e.g. {what}=1,2,4")
        out.append(k)
    if not out:
        raise VariantError(f"{what}={value!r} is empty; give at least one value")
    return sorted(set(out))


def _blocks(profile: Any) -> int:
    """Transformer blocks of the profile, else its layers (the units ``pp`` must divide)."""
    from .workload.parallelism import block_of_layer

    ids = {b for b in block_of_layer(profile) if b is not None}
    return len(ids) if ids else profile.n_layers


def enumerate_plans(profile: Any, cluster: Any, *, tp: Any = None, pp: Any = None,
                    microbatches: Any = None, global_batch: int | None = None,
                    schedules: Sequence[str] = ("1f1b",), virtual_stages: int = 2,
                    sequence_parallel: bool = False) -> list[Any]:
    """The valid :class:`~sgdnet.workload.parallelism.Parallelism` plans (module docstring).

    Parameters
    ----------
    profile : ModelProfile
    cluster : Cluster
        Its ``workers`` are the GPUs; its topology's ``gpus_per_node`` bounds ``tp``.
    tp, pp, microbatches : list of int, int or comma-separated str, optional
        Candidates (default: every divisor of the GPUs per node; every divisor of the blocks;
        see ``global_batch``).
    global_batch : int, optional
        Sequences (samples) per iteration: ``m = global_batch / (dp * batch_size)``.
    schedules : sequence of str
        Pipeline schedules to try (``"1f1b"``, ``"gpipe"``, ``"interleaved"``).
    virtual_stages : int
        Model chunks per device of the interleaved schedule.
    sequence_parallel : bool
        Megatron's sequence parallelism on the plans with ``tp >= 2``.

    Raises
    ------
    VariantError
        A ``tp`` that does not divide the GPUs per node, a ``pp`` that does not divide the
        blocks, an unknown schedule, both ``microbatches`` and ``global_batch``.
    """
    from .workload.parallelism import SCHEDULES, Parallelism

    n = cluster.workers
    topo = getattr(cluster, "topology", None)
    g = topo.gpus_per_node if topo is not None else 1
    nb = _blocks(profile)
    scheds = list(dict.fromkeys(schedules))
    bad = [s for s in scheds if s not in SCHEDULES]
    if bad or not scheds:
        raise VariantError(f"schedules={list(schedules)!r}: use some of {list(SCHEDULES)}")
    if microbatches is not None and global_batch is not None:
        raise VariantError("give microbatches or global_batch, not both (global_batch sets "
                           "m = global_batch / (dp * batch_size) for each plan)")
    tps = _ints(tp, "tp") or _divisors(g)
    wrong = [t for t in tps if g % t]
    if wrong:
        raise VariantError(f"tp={wrong}: a TP group stays inside a node, so tp must divide the "
                           f"{g} GPUs per node; use some of {_divisors(g)}")
    pps = _ints(pp, "pp") or _divisors(nb)
    wrong = [p for p in pps if nb % p]
    if wrong:
        raise VariantError(f"pp={wrong}: every stage gets as many of the {nb} blocks of "
                           f"{profile.name!r}, so pp must divide {nb}; use some of "
                           f"{_divisors(nb)}")
    ms = _ints(microbatches, "microbatches")
    if global_batch is not None:
        global_batch = _ints(global_batch, "global_batch")[0]  # type: ignore[index]
    v = _ints(virtual_stages, "virtual_stages")[0]  # type: ignore[index]
    plans = []
    for t in tps:
        for p in pps:
            if n % (t * p):
                continue
            d = n // (t * p)
            if ms is not None:
                mlist = ms
            elif global_batch is not None:
                b = d * profile.batch_size
                mlist = [global_batch // b] if global_batch % b == 0 else []
            else:
                mlist = [4 * p if p > 1 else 1]
            if p == 1:  # one stage: every schedule is the same; the first that needs no chunks
                plain = [s for s in scheds if s != "interleaved"]
                cands = [(plain[0], 1)] if plain else []
            else:
                cands = [(s, v if s == "interleaved" else 1) for s in scheds]
            for s, vs in cands:
                if s == "interleaved" and (nb % (p * vs) or vs < 2):
                    continue
                for m in mlist:
                    if s == "interleaved" and m % p:
                        continue
                    plans.append(Parallelism(tp=t, pp=p, dp=d, microbatches=m, schedule=s,
                                             virtual_stages=vs,
                                             sequence_parallel=sequence_parallel and t > 1))
    return plans


@dataclass
class PlanStudy:
    """What :func:`best_plans` found.

    Attributes
    ----------
    rows : list of dict
        One per plan, the fastest first, the plans that do not fit (``fits=False``, not
        predicted) and failed ones last: ``tp``, ``pp``, ``dp``, ``microbatches``,
        ``schedule``, ``virtual_stages``, ``global_batch``, ``memory_gb`` (None: not counted),
        ``fits`` (True, False, or None when the memory or the device's is unknown),
        ``predicted``, ``samples_per_s_mean`` / ``_lo`` / ``_hi``, ``iteration_s``,
        ``bubble`` (closed form), ``idle`` (measured, mean over the stages),
        ``tflops_per_gpu``, ``mfu``, ``error``.
    best : int or None
        Index of the fastest plan that fits (None: none does).
    title : str
    device : str or None
        The device the memory was checked against.
    gpus : int
    """

    rows: list[dict[str, Any]]
    best: int | None
    title: str
    device: str | None = None
    gpus: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def best_row(self) -> dict[str, Any] | None:
        """The fastest fitting plan's row."""
        return None if self.best is None else self.rows[self.best]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view."""
        return {"title": self.title, "device": self.device, "gpus": self.gpus,
                "best": self.best, "rows": self.rows, "notes": list(self.notes)}


def plan_cluster(cluster: Any = None, *, instance: str | None = None, nodes: int | None = None,
                 transport: str | None = "auto") -> tuple[Any, str | None]:
    """``(cluster, transport)``: ``nodes`` instances of the catalog's ``instance``, or a
    cluster file (a path) of ``nodes`` nodes of its topology's GPUs, or ``cluster`` as given."""
    from .workload.cluster import Cluster

    if instance is not None:
        from .workload.instances import resolve_instance

        clu, tr, _ = resolve_instance(instance, nodes, cluster, transport, None)
        return clu, tr
    if cluster is None:
        raise VariantError("best_plans() needs a cluster: a Cluster, a cluster file, or "
                           "instance= and nodes=")
    if isinstance(cluster, Cluster):
        if nodes is not None:
            raise VariantError("nodes= goes with a cluster file or instance=, not a Cluster "
                               "(give the Cluster its workers)")
        return cluster, None if transport == "auto" else transport
    from .workload.instances import read_cluster_file

    cf, _ = read_cluster_file(cluster)
    g = cf.topology.gpus_per_node if cf.topology is not None else 1
    workers = cf.workers if nodes is None else nodes * g
    return Cluster(**cf.cluster_kwargs(workers)), None if transport == "auto" else transport


def best_plans(model: Any, cluster: Any = None, *, tp: Any = None, pp: Any = None,
               microbatches: Any = None, global_batch: int | None = None,
               schedules: Sequence[str] = ("1f1b",), virtual_stages: int = 2,
               sequence_parallel: bool = False, granularity: str = "coarse",
               device: Any = None, instance: str | None = None, nodes: int | None = None,
               transport: str | None = "auto", steps: int = 3, warmup: int | None = 1,
               replications: int = 4, seed: int = 0,
               runner: Callable[..., Any] | None = None, **options: Any) -> PlanStudy:
    """Every valid plan's memory and (when it fits) predicted throughput, fastest first.

    Parameters
    ----------
    model : str or ModelProfile
        A transformer profile (:mod:`sgdnet.workload.transformers`, :mod:`~.llms`) for the
        memory figures; other profiles are predicted with their memory unknown.
    cluster : Cluster, path or None
        The cluster, or a cluster file of ``nodes`` nodes; None with ``instance``.
    tp, pp, microbatches, global_batch, schedules, virtual_stages, sequence_parallel
        The plans (:func:`enumerate_plans`).
    granularity : str
        Of the nets (default ``"coarse"``: quick; ``"fine"``: flows on the links).
    device : str or Device, optional
        The GPU the memory is checked against (default the profile's, or the instance's).
    instance, nodes, transport
        ``nodes`` instances of the catalog (the model re-timed for their GPU), as
        :func:`sgdnet.predict`.
    steps, warmup, replications, seed
        As :func:`sgdnet.predict` (a step is an iteration of the pipeline).
    runner : callable, optional
        ``runner("pipeline", model, cluster, **kwargs)`` in place of :func:`sgdnet.predict`.
    **options
        Other options of the ``pipeline`` variant (``recompute``, ``zero_stage``, ...).

    Raises
    ------
    VariantError
        Bad plan lists (:func:`enumerate_plans`), plan options in ``options``, no valid plan.
    """
    from .pipeline_metrics import pipeline_report
    from .prediction import predict
    from .variants import get
    from .variants.inputs import resolve_model
    from .workload.memory import known_device
    from .workload.parallelism import bubble_fraction, memory_for_plan

    clash = sorted(set(options) & {"tp", "pp", "dp", "microbatches", "schedule",
                                   "virtual_stages", "sequence_parallel"})
    if clash:
        raise VariantError(f"best_plans(): {clash} are the plans searched; give them as "
                           "tp=/pp=/microbatches=/schedules=/virtual_stages= lists")
    prof = resolve_model(model)
    clu, tr = plan_cluster(cluster, instance=instance, nodes=nodes, transport=transport)
    if instance is not None:
        from .workload.instances import instance_profile

        prof, _ = instance_profile(instance, prof)
    plans = enumerate_plans(prof, clu, tp=tp, pp=pp, microbatches=microbatches,
                            global_batch=global_batch, schedules=schedules,
                            virtual_stages=virtual_stages, sequence_parallel=sequence_parallel)
    if not plans:
        raise VariantError(f"no valid plan of {prof.name!r} on {clu.workers} GPUs for tp={tp}, "
                           f"pp={pp}, microbatches={microbatches}, global_batch={global_batch}"
                           f", schedules={list(schedules)}; widen the lists (a global batch "
                           "must be a multiple of dp * batch size)")
    spec = get("pipeline")
    dev = known_device(prof, device)
    run = runner or predict
    rows = []
    for plan in plans:
        opts = {**options, **{k: v for k, v in plan.to_dict().items() if k != "order"}}
        row: dict[str, Any] = {**plan.to_dict(), "gpus": plan.size,
                               "global_batch": plan.dp * plan.microbatches * prof.batch_size,
                               "bubble": bubble_fraction(plan.pp, plan.microbatches,
                                                         plan.virtual_stages),
                               "memory_gb": None, "fits": None, "predicted": False,
                               "samples_per_s_mean": None, "samples_per_s_lo": None,
                               "samples_per_s_hi": None, "iteration_s": None, "idle": None,
                               "tflops_per_gpu": None, "mfu": None, "error": None}
        del row["order"]
        try:
            mem = memory_for_plan(prof, clu, spec.resolve(opts), dev)
        except SgdnetError as e:
            row["error"] = str(e)
            rows.append(row)
            continue
        if mem is not None:
            row["memory_gb"] = mem.total / 1e9
            if mem.device is not None and mem.device.memory is not None:
                row["fits"] = bool(mem.fits())
        if row["fits"] is False:
            rows.append(row)  # refused: not predicted
            continue
        try:
            pred = run("pipeline", prof, clu, granularity=granularity, steps=steps,
                       warmup=warmup, replications=replications, seed=seed, device=device,
                       transport=tr, check_memory=False, parallel=False, **opts)
        except SgdnetError as e:
            row["error"] = str(e)
            rows.append(row)
            continue
        _fill(row, pred, pipeline_report)
        rows.append(row)
    rows.sort(key=_order)
    best = next((i for i, r in enumerate(rows) if r["predicted"] and r["fits"] is not False),
                None)
    title = (f"{prof.name} (batch {prof.batch_size} per micro-batch) on {clu.workers} GPUs"
             f"{'' if dev is None else f' ({dev.name})'}, {granularity} nets: plans by "
             "samples/s")
    notes = []
    if dev is None or dev.memory is None:
        notes.append("no device memory known: no plan refused (give device=)")
    return PlanStudy(rows, best, title, None if dev is None else dev.name, clu.workers, notes)


def _fill(row: dict[str, Any], pred: Any, report: Callable[..., Any]) -> None:
    sp = pred.samples_per_s
    lo, hi = sp.ci()
    row.update(predicted=True, samples_per_s_mean=float(sp.mean), samples_per_s_lo=float(lo),
               samples_per_s_hi=float(hi))
    try:
        rep = report(pred)
    except SgdnetError:  # a runner's result without the pipeline's meta (tests)
        return
    row["iteration_s"] = float(rep.iteration_s.mean)
    row["idle"] = float(sum(e.mean for e in rep.idle.values()) / len(rep.idle))
    if rep.tflops_per_gpu is not None:
        row["tflops_per_gpu"] = float(rep.tflops_per_gpu.mean)
    if rep.mfu is not None:
        row["mfu"] = float(rep.mfu.mean)


def _order(r: dict[str, Any]) -> tuple[int, float]:
    if r["predicted"]:
        x = r["samples_per_s_mean"]
        return (0 if r["fits"] is not False else 1,
                -x if x is not None and math.isfinite(x) else math.inf)
    return (2 if r["error"] is None else 3, r["memory_gb"] or math.inf)


def _f(x: Any, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def format_plans(study: PlanStudy) -> str:
    """The table of :func:`best_plans`: ``*`` the fastest plan that fits, ``x`` plans that do
    not fit (not predicted), ``!`` plans whose build or prediction failed."""
    from ._text import table

    head = ["", "tp", "pp", "dp", "m", "schedule", "batch", "memory/GPU", "samples/s",
            "iteration", "bubble", "idle", "TFLOP/s/GPU", "MFU"]
    body = []
    for i, r in enumerate(study.rows):
        mark = "*" if i == study.best else ("x" if r["fits"] is False else
                                            ("!" if r["error"] else ""))
        sched = r["schedule"] if r["pp"] > 1 else "-"
        if r["virtual_stages"] > 1:
            sched += f" v={r['virtual_stages']}"
        sps = "-"
        if r["predicted"]:
            m, lo, hi = r["samples_per_s_mean"], r["samples_per_s_lo"], r["samples_per_s_hi"]
            sps = f"{m:,.4g}" + (f" ± {(hi - lo) / 2:.2g}" if hi > lo else "")
        elif r["fits"] is False:
            sps = "does not fit"
        elif r["error"]:
            sps = "failed"
        body.append([mark, str(r["tp"]), str(r["pp"]), str(r["dp"]), str(r["microbatches"]),
                     sched, str(r["global_batch"]), _f(r["memory_gb"], ".1f") +
                     ("" if r["memory_gb"] is None else " GB"), sps,
                     _f(r["iteration_s"], ".4g") + ("" if r["iteration_s"] is None else " s"),
                     _f(r["bubble"], ".3f"), _f(r["idle"], ".3f"),
                     _f(r["tflops_per_gpu"], ".1f"), _f(r["mfu"], ".3f")])
    lines = [study.title, "", table(head, body, [False] * 6 + [True] * 8), ""]
    n_out = sum(r["fits"] is False for r in study.rows)
    lines.append(f"{len(study.rows)} plans; {n_out} do not fit the "
                 f"{study.device or 'device'}'s memory (x, not predicted); bubble: the closed "
                 "form (p-1)/(v m + p-1) of equal stages and free communication; idle: "
                 "predicted, mean over the stages")
    for r in study.rows:
        if r["error"]:
            lines.append(f"! tp={r['tp']} pp={r['pp']} m={r['microbatches']}: {r['error']}")
            break
    lines += study.notes
    b = study.best_row
    if b is None:
        lines.append("no plan fits: more GPUs, recompute=True, zero_stage=1, a smaller batch")
    else:
        sched = "" if b["pp"] == 1 else b["schedule"] + (
            f" v={b['virtual_stages']}" if b["virtual_stages"] > 1 else "")
        lines.append(f"fastest plan that fits: tp={b['tp']} pp={b['pp']} dp={b['dp']} "
                     f"m={b['microbatches']} {sched}".rstrip()
                     + f", {b['samples_per_s_mean']:,.4g} samples/s")
    return "\n".join(lines)


def plan_from_args(args: Any) -> PlanStudy:
    """:func:`best_plans` with the options of ``sgdnet plan`` (an argparse namespace)."""
    from .workload.compute import retime

    model: Any = args.model
    if args.batch_size is not None or args.precision is not None:
        from .variants.inputs import resolve_model

        model = retime(resolve_model(model), batch_size=args.batch_size,
                       precision=args.precision)
    cluster: Any = args.cluster
    if cluster is None and args.instance is None:
        from .workload.cluster import Cluster

        cluster = Cluster(workers=args.workers or 1)
    return best_plans(model, cluster, tp=args.tp, pp=args.pp, microbatches=args.microbatches,
                      global_batch=args.global_batch, schedules=args.schedules.split(","),
                      virtual_stages=args.virtual_stages, granularity=args.granularity,
                      device=args.device, instance=args.instance, nodes=args.nodes,
                      steps=args.steps, warmup=args.warmup, replications=args.replications,
                      seed=args.seed, **dict(args.option))
