"""Choosing what to rent: instance types x node counts x variants, the Pareto front of time and
cost to train (``sgdnet choose``).

Every configuration is one :func:`sgdnet.predict` on ``nodes`` instances of the catalog
(:mod:`sgdnet.workload.instances`), the model re-timed for the instance's GPU; its time and
cost come from :mod:`sgdnet.workload.cost`. A configuration *dominates* another when it is no
slower and no dearer and strictly better in one of the two; the Pareto front is the set no
other configuration dominates (by the means of the replications; the table carries the CIs).
``budget`` (dollars) and ``deadline`` (hours) drop configurations before the front is taken.
Without a training length the two objectives are per million samples: hours per 10**6 samples
and dollars per 10**6 samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._check import number_or_none
from .errors import ProfileError, VariantError

__all__ = ["Choice", "choose", "choose_from_args", "pareto_front", "format_choice"]


_num = number_or_none


def pareto_front(rows: Sequence[Mapping[str, Any]], x: str = "time_h",
                 y: str = "cost") -> list[int]:
    """Indices of the rows no other row dominates on (``x``, ``y``), both minimised, sorted by
    ``x`` (rows where either is missing take no part).

    Examples
    --------
    >>> pareto_front([{"time_h": 1, "cost": 9}, {"time_h": 2, "cost": 4},
    ...               {"time_h": 3, "cost": 5}, {"time_h": 4, "cost": 1}])
    [0, 1, 3]
    """
    pts = [(i, _num(r.get(x)), _num(r.get(y))) for i, r in enumerate(rows)]
    pts = [(i, a, b) for i, a, b in pts if a is not None and b is not None]
    front = []
    for i, a, b in pts:
        dominated = any(a2 <= a and b2 <= b and (a2 < a or b2 < b) for _, a2, b2 in pts)
        if not dominated:
            front.append((a, b, i))
    return [i for _, _, i in sorted(front)]


@dataclass
class Choice:
    """What :func:`choose` found.

    Attributes
    ----------
    rows : list of dict
        One per configuration: ``instance``, ``nodes``, ``gpus``, ``variant``,
        ``samples_per_s_*``, the cost columns, ``time_h`` / ``cost`` (the two objectives),
        ``within`` (inside the budget and deadline) and ``front`` (on the Pareto front).
    front : list of int
        Indices of the front's rows, fastest first.
    objective : str
        ``"train"`` (time and cost to train) or ``"per_m_samples"``.
    title : str
    dropped : dict
        How many configurations the budget and the deadline dropped.
    """

    rows: list[dict[str, Any]]
    front: list[int]
    objective: str
    title: str
    dropped: dict[str, int] = field(default_factory=dict)

    def front_keys(self) -> list[tuple[Any, Any, Any]]:
        """``(instance, nodes, variant)`` of the front's rows."""
        return [(self.rows[i]["instance"], self.rows[i]["nodes"], self.rows[i]["variant"])
                for i in self.front]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view."""
        return {"title": self.title, "objective": self.objective, "rows": self.rows,
                "front": self.front, "dropped": dict(self.dropped)}


def _names(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, Iterable):
        items = [str(v).strip() for v in value]
    else:
        raise VariantError(f"{what}={value!r}: give a list of names or a comma-separated string")
    items = [v for v in items if v]
    if not items:
        raise VariantError(f"{what}={value!r} is empty; give at least one")
    return items


def choose(model: Any, *, instances: Any = None, nodes: Sequence[int] = (1, 2, 4),
           variants: Any = "allreduce", framework: str | None = None,
           train_samples: float | None = None, budget: float | None = None,
           deadline: float | None = None, granularity: str = "coarse",
           batch_size: int | None = None, precision: str | None = None, steps: int = 100,
           warmup: int | None = 10, replications: int = 4, seed: int = 0,
           compute_cv: float = 0.0, runner: Callable[..., Any] | None = None,
           **options: Any) -> Choice:
    """Predict every instance x node count x variant and take the Pareto front of time and cost.

    Parameters
    ----------
    model : str or ModelProfile
        A profile whose times are for a built-in device (so it can be re-timed for each
        instance's GPU).
    instances : list of str or str, optional
        Catalog names (default: every instance with a price).
    nodes : sequence of int
        Instance counts.
    variants : list of str or str
        SGD variants (ignored with ``framework``, whose variant is used).
    framework : str, optional
        A framework of :mod:`sgdnet.workload.frameworks`.
    train_samples : float, optional
        Samples to train; needed for ``budget`` and ``deadline``.
    budget, deadline : float, optional
        Dollars to train at most; hours to train at most.
    granularity, steps, warmup, replications, seed, **options
        As :func:`sgdnet.predict`; a variant with a ``channels`` option gets
        ``channels="auto"`` (a ring per NIC, as NCCL runs) unless ``options`` say otherwise.
    compute_cv : float
        Coefficient of variation of compute times (the spread the CIs come from; 0: the
        nets are deterministic and one replication is played).
    batch_size, precision : optional
        Re-time the model (:func:`sgdnet.workload.compute.retime`) before the instance's GPU.
    runner : callable, optional
        ``runner(variant, model, None, **kwargs)`` in place of :func:`sgdnet.predict` (tests).

    Raises
    ------
    VariantError
        A budget or deadline without a training length, empty lists, bad node counts.
    ProfileError
        A profile that cannot be re-timed for another GPU.
    UnknownNameError
        An instance not in the catalog.
    """
    from .prediction import predict, summarize
    from .variants import get
    from .variants.inputs import resolve_model
    from .workload.compute import DEVICES, retime
    from .workload.cost import training_samples
    from .workload.instances import get_instance, instance_names, instance_profile

    train = training_samples(train_samples)
    if (budget is not None or deadline is not None) and train is None:
        raise VariantError("a budget or deadline needs a training length: give train_samples "
                           "(CLI: --samples S or --epochs E --dataset-size D)")
    names = _names(instances, "instances") or [
        n for n in instance_names() if get_instance(n).price_per_hour is not None]
    insts = [get_instance(n) for n in names]
    ns = list(nodes)
    if not ns or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in ns):
        raise VariantError(f"nodes={nodes!r} must be a non-empty list of integers >= 1")
    vs = [None] if framework is not None else _names(variants, "variants")
    prof = resolve_model(model)
    if prof.device not in DEVICES:
        raise ProfileError(f"profile {prof.name!r} is for {prof.device!r}, not a built-in "
                           "device, so it cannot be re-timed for each instance's GPU; use a "
                           "profile built for a stated device (sgdnet models: resnet152, "
                           "resnet34, vgg19, inception_v4, bert_large, gpt2_medium, vit_l16)")
    if batch_size is not None or precision is not None:
        prof = retime(prof, batch_size=batch_size, precision=precision)
    run = runner or predict
    from .workload.cluster import Cluster

    noise = Cluster(compute_cv=compute_cv)
    rows: list[dict[str, Any]] = []
    for inst in insts:
        p_inst, _ = instance_profile(inst, prof)
        for n in ns:
            for v in vs:
                opts = dict(options)
                if v is not None and "channels" in get(v).option_names():
                    opts.setdefault("channels", "auto")  # a ring per NIC, as NCCL runs
                pred = run(v, p_inst, noise, instance=inst.name, nodes=n, framework=framework,
                           granularity=granularity, steps=steps, warmup=warmup,
                           replications=replications, seed=seed, train_samples=train, **opts)
                cols = dict(pred) if isinstance(pred, Mapping) else summarize(pred)
                row = {"instance": inst.name, "nodes": n, "gpus": n * inst.gpus_per_node,
                       "device": inst.device,
                       "variant": v if v is not None else getattr(pred, "variant", framework)}
                row.update({k: cols.get(k) for k in (
                    "samples_per_s_mean", "samples_per_s_lo", "samples_per_s_hi",
                    "price_per_hour", "cost_per_hour", "cost_per_m_samples_mean",
                    "cost_per_m_samples_lo", "cost_per_m_samples_hi", "time_to_train_h_mean",
                    "time_to_train_h_lo", "time_to_train_h_hi", "cost_to_train_mean",
                    "cost_to_train_lo", "cost_to_train_hi")})
                rows.append(row)
    return _rank(rows, train, budget, deadline, prof.name, granularity)


def choose_from_args(args: Any) -> Choice:
    """:func:`choose` with the options of ``sgdnet choose`` (an argparse namespace)."""
    from .workload.cost import training_samples

    return choose(args.model, instances=args.instances, nodes=args.nodes,
                  variants=args.variants, framework=args.framework,
                  train_samples=training_samples(args.samples, args.epochs, args.dataset_size),
                  budget=args.budget, deadline=args.deadline, granularity=args.granularity,
                  batch_size=args.batch_size, precision=args.precision, steps=args.steps,
                  warmup=args.warmup, replications=args.replications, seed=args.seed,
                  compute_cv=args.compute_cv)


def _rank(rows: list[dict[str, Any]], train: float | None, budget: float | None,
          deadline: float | None, model: str, granularity: str) -> Choice:
    """The objectives, the budget and deadline, and the front of ``rows``."""
    dropped = {"budget": 0, "deadline": 0}
    for r in rows:
        rate = _num(r.get("samples_per_s_mean"))
        if train is not None:
            r["time_h"], r["cost"] = r.get("time_to_train_h_mean"), r.get("cost_to_train_mean")
        else:
            r["time_h"] = None if not rate else 1e6 / rate / 3600.0
            r["cost"] = r.get("cost_per_m_samples_mean")
        over_b = budget is not None and (r["cost"] is None or r["cost"] > budget)
        over_d = deadline is not None and (r["time_h"] is None or r["time_h"] > deadline)
        dropped["budget"] += bool(over_b)
        dropped["deadline"] += bool(over_d)
        r["within"] = not (over_b or over_d)
    inside = [i for i, r in enumerate(rows) if r["within"]]
    front = [inside[j] for j in pareto_front([rows[i] for i in inside])]
    for i, r in enumerate(rows):
        r["front"] = i in front
    what = "to train" if train is not None else "per 10^6 samples"
    title = f"{model} ({granularity}): time and cost {what}"
    return Choice(rows, front, "train" if train is not None else "per_m_samples", title,
                  dropped)


def _money(x: Any) -> str:
    return "unknown" if x is None else (f"${x:,.0f}" if x >= 100 else f"${x:,.2f}")


def _pm(m: Any, lo: Any, hi: Any, fmt: Callable[[float], str]) -> str:
    if m is None:
        return "unknown"
    if lo is None or hi is None or hi <= lo:
        return fmt(m)
    return f"{fmt(m)} ± {_hw(m, (hi - lo) / 2, fmt)}"


def format_choice(choice: Choice) -> str:
    """The table of :func:`choose`: every configuration, the front marked ``*``, then the
    front from the fastest to the cheapest."""
    from ._text import table

    train = choice.objective == "train"
    head = ["", "instance", "nodes", "GPUs", "variant", "samples/s", "$/h",
            "time to train" if train else "h / M samples",
            "cost to train" if train else "$ / M samples"]
    body = []
    order = sorted(range(len(choice.rows)), key=lambda i: (
        not choice.rows[i]["within"], _num(choice.rows[i]["time_h"]) or math.inf))
    for i in order:
        r = choice.rows[i]
        mark = "*" if r["front"] else ("" if r["within"] else "x")
        if train:
            t = _pm(r["time_to_train_h_mean"], r["time_to_train_h_lo"], r["time_to_train_h_hi"],
                    lambda h: f"{h:,.3g} h")
            c = _pm(r["cost_to_train_mean"], r["cost_to_train_lo"], r["cost_to_train_hi"],
                    _money)
        else:
            t = "unknown" if r["time_h"] is None else f"{r['time_h']:.3g} h"
            c = _pm(r["cost_per_m_samples_mean"], r["cost_per_m_samples_lo"],
                    r["cost_per_m_samples_hi"], _money)
        body.append([mark, r["instance"], str(r["nodes"]), str(r["gpus"]), str(r["variant"]),
                     f"{r['samples_per_s_mean']:,.0f}" if r["samples_per_s_mean"] else "-",
                     _money(r["cost_per_hour"]), t, c])
    lines = [choice.title, "", table(head, body, [False, False] + [True] * 7), ""]
    d = choice.dropped
    lines.append(f"* Pareto front ({len(choice.front)} of {len(choice.rows)}): no other "
                 "configuration is both faster and cheaper (means of the replications)"
                 + (f"; x: outside the budget ({d.get('budget', 0)}) or deadline "
                    f"({d.get('deadline', 0)})" if any(d.values()) else ""))
    unknown = sorted({r["instance"] for r in choice.rows if r["cost"] is None})
    if unknown:
        lines.append(f"no price for {', '.join(unknown)}: not on the front (give "
                     "price_per_hour in a cluster file)")
    for i in choice.front:
        r = choice.rows[i]
        lines.append(f"  {r['instance']} x {r['nodes']} ({r['variant']}): "
                     f"{r['time_h']:,.3g} h, {_money(r['cost'])}")
    return "\n".join(lines)


def _hw(mean: float, half: float, fmt: Callable[[float], str]) -> str:
    """A CI's half-width: in the mean's format, or with 2 significant digits when it is
    below 1% of the mean (where that format would print 0)."""
    return fmt(half) if half >= 0.01 * abs(mean) else f"{half:.2g}"
