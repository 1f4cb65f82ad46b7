"""The registry of variants by name: :func:`register` (a decorator on the fine builder),
:func:`names`, :func:`get`, :func:`build`, and :class:`VariantSpec` (options, builders,
defaults). Variant modules of :mod:`sgdnet.variants` are discovered on the first query."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._gc import paused_gc
from ..errors import UnknownNameError, VariantError
from .inputs import resolve_cluster, resolve_model
from .options import ACCUMULATE, OPTIMIZER, OPTION_HINTS, Option

__all__ = ["GRANULARITIES", "VariantSpec", "register", "names", "get", "build"]

#: The two model granularities every variant has (``"coarse+"``, the coarse model with
#: heuristics, exists for the variants in :data:`sgdnet.variants.coarse.SUPPORTED`).
GRANULARITIES = ("fine", "coarse")

#: Built-in variants, imported first (registration order).
_BUILTIN = ("sync_ps", "async_ps", "ssp", "allreduce")


BuildFn = Callable[..., Any]


@dataclass(frozen=True)
class VariantSpec:
    """A registered variant: its options and its fine / coarse builders.

    Attributes
    ----------
    name : str
        Registry name (``"sync-ps"``).
    summary : str
        One-line description.
    options : tuple of Option
        Accepted options (all of them; coarse builders ignore the fine-only ones).
    build_fine, build_coarse : callable
        ``f(model: ModelProfile, cluster: Cluster, **resolved_options) -> Net``.
    lockstep : bool
        True when all workers advance in lockstep (bulk-synchronous), so that
        ``iterations_per_s = steps_per_s / n`` is meaningful.
    warmup : callable or None
        ``f(cluster, options) -> int``: default warm-up in steps *per worker*; ``None`` means 10.
    own_step_costs : bool
        True when the builders take the profile's step costs outside the layers themselves
        (the sharded variants charge the optimizer step on a shard): :meth:`build` then does
        not fold them into the layers.
    prepare : callable or None
        ``f(profile, granularity, options) -> profile``, called by :meth:`build` on the
        resolved profile and the caller's options before anything else: a variant's own
        transformation of the profile, and its refusals of generic options it does not model
        (``pipeline`` keeps its step costs apart and refuses ``accumulate``).
    memory : callable or None
        ``f(profile, cluster, options, device) -> MemoryBreakdown or None``: the memory per GPU
        of a variant whose GPUs do not each hold what
        :func:`sgdnet.workload.memory.memory_for` counts (``pipeline``: its busiest stage);
        ``None`` means ``memory_for``.
    """

    name: str
    summary: str
    options: tuple[Option, ...]
    build_fine: BuildFn
    build_coarse: BuildFn
    lockstep: bool = False
    warmup: Callable[[Any, dict], int] | None = None
    module: str = field(default="", compare=False)
    own_step_costs: bool = False
    prepare: Callable[[Any, str, dict], Any] | None = None
    memory: Callable[[Any, Any, dict, Any], Any] | None = None

    def option_names(self) -> list[str]:
        """Names of the accepted options, in declaration order."""
        return [o.name for o in self.options]

    def defaults(self) -> dict[str, Any]:
        """Every option with its default value."""
        return {o.name: o.default for o in self.options}

    def resolve(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``options`` and fill in defaults.

        Raises
        ------
        VariantError
            An unknown option name (the message lists the valid ones) or a bad value (the message
            names the option, the value and what is valid).
        """
        valid = self.option_names()
        unknown = [k for k in options if k not in valid]
        if unknown:
            hints = "".join(f" ({k}: {OPTION_HINTS[k]})" for k in unknown if k in OPTION_HINTS)
            raise VariantError(
                f"variant {self.name!r} has no option(s) {unknown}{hints}; valid options are "
                + ", ".join(f"{o.name} ({o.doc})" for o in self.options)
            )
        out: dict[str, Any] = {}
        for o in self.options:
            v = options.get(o.name, o.default)
            if o.check is not None and o.name in options:
                try:
                    v = o.check(v)
                except VariantError:
                    raise
                except Exception as e:  # ValueError, TypeError, UnitError...
                    raise VariantError(
                        f"variant {self.name!r}: option {o.name}={v!r} is invalid: {e}; "
                        f"valid: {o.doc}"
                    ) from None
            out[o.name] = v
        return out

    def default_warmup(self, cluster, options: Mapping[str, Any]) -> int:
        """Default warm-up, in steps per worker (enough to fill the pipeline)."""
        return 10 if self.warmup is None else int(self.warmup(cluster, dict(options)))

    def build(self, model, cluster, granularity: str = "fine", **options):
        """Build the net of this variant; see :func:`sgdnet.variants.build`.

        Builders read layer times only, so the profile's costs outside the layers (zero_grad,
        loss, optimizer step) are folded into its layers here
        (:meth:`ModelProfile.with_step_costs_folded`, a no-op for profiles without them): the
        one place :func:`sgdnet.predict`, the CLI and direct builds share.

        The generic option ``accumulate=k`` (every variant: :data:`.options.ACCUMULATE`) is
        handled here too, before the folding and never seen by a builder: the profile becomes
        :meth:`ModelProfile.with_accumulation` ``(k, cluster.compute_cv)``, so a step of any
        variant is ``k`` micro-batches and one exchange (for ``sync-ps``, ``allreduce``,
        ``backup``, ``pipe-sgd`` one synchronisation per ``k`` micro-batches; for ``async-ps``,
        ``ssp``, ``dssp`` one push and pull; for ``local-sgd`` and ``cocod`` each local step
        accumulates), and ``net.meta["batch_sizes"]`` counts ``k`` times the samples.
        ``granularity="coarse+"`` refuses ``k > 1`` (its heuristics are derived for one
        micro-batch per step).

        So is the generic option ``optimizer`` (:data:`.options.OPTIMIZER`; a variant may
        declare its own, which its builder then also sees): given, the profile's optimizer
        step is re-timed for it (:func:`_with_optimizer`).
        """
        if granularity not in (*GRANULARITIES, "coarse+"):
            raise VariantError(
                f"granularity={granularity!r} is unknown; use one of {list(GRANULARITIES)} or "
                "'coarse+' (coarse with heuristics, sgdnet.variants.coarse)"
            )
        prof = resolve_model(model)
        if self.prepare is not None:
            prof = self.prepare(prof, granularity, options)
        clu = resolve_cluster(cluster)
        heur = options.pop("heuristics", None) if granularity == "coarse+" else None
        opts = self.resolve(options)
        acc = opts.pop(ACCUMULATE.name, 1)
        generic = OPTIMIZER in self.options
        optimizer = opts.pop(OPTIMIZER.name, None) if generic else opts.get(OPTIMIZER.name)
        prof = _with_optimizer(prof, optimizer, opts)
        fn = self.build_fine if granularity == "fine" else self.build_coarse
        if granularity == "coarse+":  # the coarse model with heuristics (docs/coarse.md)
            from . import coarse

            _refuse_in_coarse_plus(opts, acc)
            fn = functools.partial(coarse.build, self.name, heuristics_=heur)
        prof = prof.with_accumulation(acc, clu.compute_cv)
        if not self.own_step_costs:
            prof = prof.with_step_costs_folded()
        fallback = None
        if granularity == "fine" and "max_layers" in opts and options.get("max_layers") is None:
            from .budget import ElementCounter, fit_profile

            def probe(model, cluster):
                with paused_gc():
                    return fn(model, cluster, **opts)

            prof, groups, fallback = fit_profile(ElementCounter(probe, clu), prof, clu.workers,
                                                 clu.compute_cv, _compact(prof, clu, opts))
            if groups is not None:
                opts["max_layers"] = groups
        with paused_gc():
            net = fn(prof, clu, **opts)
        if fallback is not None:
            from .budget import announce

            announce(fallback, len(net.places) + len(net.transitions),
                     f"{self.name} on {clu.workers} workers")
            net.meta["layer_fallback"] = fallback
        if acc > 1 and "batch_sizes" not in net.meta:  # what sgdnet.predict counts samples by
            net.meta["batch_sizes"] = [prof.batch_size] * clu.workers
        net.meta.update(
            variant=self.name,
            granularity=granularity,
            model=prof.name,
            workers=clu.workers,
            batch_size=prof.batch_size,
            lockstep=self.lockstep,
            options={**opts, ACCUMULATE.name: acc,
                     **({OPTIMIZER.name: optimizer} if generic else {})},
        )
        with paused_gc():
            net.validate()
        return net


_REGISTRY: dict[str, VariantSpec] = {}
_discovered = False


def _compact(model, cluster, opts: Mapping[str, Any]):
    """The memory budget's first fallback (:func:`.budget.fit_profile`) for a fine net of a
    sharded parameter server: ``model`` with its layers under ``shard_min_bytes`` merged into
    the next (:func:`.layers.merge_small_layers`), so that no tensor goes whole to one shard and
    ``sync-ps`` carries each group as one flow group. None for other nets (no ``shards``
    option, one shard, no finite bound, messages other than layers, ``local-sgd`` without a PS)."""
    if "shards" not in opts or opts.get("sync", "ps") != "ps":
        return None
    if opts.get("comm_granularity", "layer") != "layer":
        return None
    from .layers import shard_merge

    got = shard_merge(model, opts.get("shards") or cluster.ps_shards, cluster.shard_min_bytes,
                      cluster.compute_cv)
    return None if got is model else got


def _with_optimizer(model, optimizer: str | None, opts: Mapping[str, Any]):
    """``model`` with its optimizer step re-timed for ``optimizer``
    (:func:`sgdnet.workload.optimizer.with_optimizer`) on the profile's device, when
    ``optimizer`` is given and the device is a built-in one; else ``model`` as it is. Weights
    and gradients in the variant's ``dtype`` option (fp32 master weights), fp32 without one."""
    if optimizer is None:
        return model
    from ..workload.compute import _builtin
    from ..workload.optimizer import with_optimizer

    model = resolve_model(model)
    dev = _builtin(model.device)
    if dev is None:
        return model
    dt = opts.get("dtype") or "fp32"
    return with_optimizer(model, optimizer, dev, master_dtype="fp32", grad_dtype=dt,
                          param_dtype=dt)


def _accumulating(fn: BuildFn, generic_optimizer: bool = True) -> BuildFn:
    """``fn`` taking the generic ``accumulate`` and ``optimizer`` options too, for callers of
    ``VariantSpec.build_fine`` / ``build_coarse`` with :meth:`VariantSpec.resolve`'s options
    (:meth:`VariantSpec.build` handles them before calling, so ``fn`` never sees them there): 1 is
    dropped, ``k > 1`` builds on :meth:`ModelProfile.with_accumulation` and records the
    samples per step in ``net.meta["batch_sizes"]``; an optimizer re-times the profile's
    optimizer step (:func:`_with_optimizer`; popped unless the variant declares its own)."""

    @functools.wraps(fn)
    def build(model, cluster, **opts):
        acc = opts.pop(ACCUMULATE.name, 1)
        optimizer = (opts.pop(OPTIMIZER.name, None) if generic_optimizer
                     else opts.get(OPTIMIZER.name))
        if optimizer is not None:
            model = _with_optimizer(model, OPTIMIZER.check(optimizer), opts)
        if acc == 1:
            return fn(model, cluster, **opts)
        acc = ACCUMULATE.check(acc)
        model = resolve_model(model).with_accumulation(acc, cluster.compute_cv)
        net = fn(model, cluster, **opts)
        net.meta.setdefault("batch_sizes", [model.batch_size] * cluster.workers)
        return net

    return build


#: Options whose nets the coarse model with heuristics does not build (it would ignore them):
#: option -> the values it can take there.
_COARSE_PLUS_ONLY = {"aggregation": ("none",), "algorithm": ("ring", "tree", "dbtree",
                                                             "hierarchical", "allgather")}


def _refuse_in_coarse_plus(opts: dict, accumulate: int) -> None:
    """``granularity="coarse+"`` refuses gradient accumulation, per-node aggregation and NCCL's
    per-message choice, which its closed forms do not model, instead of ignoring them."""
    if accumulate > 1:
        raise VariantError(f"granularity='coarse+' does not model accumulate={accumulate} (its "
                           "heuristics are derived for one micro-batch per step); use "
                           "granularity='fine' (or 'coarse')")
    for name, ok in _COARSE_PLUS_ONLY.items():
        if name in opts and opts[name] not in ok:
            raise VariantError(f"granularity='coarse+' does not model {name}={opts[name]!r} "
                               "(its heuristics are closed forms of the plain nets); use "
                               "granularity='fine' or 'coarse'")


def register(
    name: str,
    *,
    summary: str,
    options: Sequence[Option],
    coarse: BuildFn,
    lockstep: bool = False,
    warmup: Callable[[Any, dict], int] | None = None,
    own_step_costs: bool = False,
    prepare: Callable[[Any, str, dict], Any] | None = None,
    memory: Callable[[Any, Any, dict, Any], Any] | None = None,
) -> Callable[[BuildFn], BuildFn]:
    """Decorator registering a variant; it decorates the fine-grained builder.

    Examples
    --------
    ::

        def build_coarse(model, cluster, **opts): ...

        @register("my-variant", summary="...", options=[Option("k", 1, "int >= 1", int)],
                  coarse=build_coarse)
        def build_fine(model, cluster, **opts): ...

    Raises
    ------
    VariantError
        ``name`` is already registered by another module.
    """

    def deco(fine: BuildFn) -> BuildFn:
        mod = getattr(fine, "__module__", "")
        old = _REGISTRY.get(name)
        if old is not None and old.module != mod:
            raise VariantError(
                f"variant name {name!r} is already registered by {old.module}; pick another name"
            )
        names_ = [o.name for o in options]
        if len(set(names_)) != len(names_):
            raise VariantError(f"variant {name!r} declares an option twice: {names_}")
        if ACCUMULATE.name in names_:
            raise VariantError(f"variant {name!r} declares {ACCUMULATE.name!r}, which the "
                               "registry gives every variant (VariantSpec.build); drop it")
        generic = OPTIMIZER.name not in names_  # else the variant's own optimizer option
        _REGISTRY[name] = VariantSpec(
            name=name,
            summary=summary,
            options=(*options, ACCUMULATE, *((OPTIMIZER,) if generic else ())),
            build_fine=_accumulating(fine, generic),
            build_coarse=_accumulating(coarse, generic),
            lockstep=lockstep,
            warmup=warmup,
            module=mod,
            own_step_costs=own_step_costs,
            prepare=prepare,
            memory=memory,
        )
        return fine

    return deco


def _discover() -> None:
    """Import every public module of :mod:`sgdnet.variants`, built-in variants first.

    Modules of the package are net builders only (no engine, no analysis of results), so
    importing the helper modules too is harmless: a new variant module registers itself by
    being there, and a new helper module needs no list to be kept up to date.
    """
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = __name__.rpartition(".")[0]
    for m in _BUILTIN:
        importlib.import_module(f"{package}.{m}")
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")


def _own_module_spec(name: str) -> VariantSpec | None:
    """The spec of ``name`` after importing the module of the package named after it
    (``"sync-ps"``, ``"Sync_PS"``: :mod:`.sync_ps`), None when there is no such module or it
    does not register that name."""
    key = name.strip().lower().replace("_", "-")
    stem = key.replace("-", "_")
    if not stem.isidentifier() or stem.startswith("_"):
        return None
    package = __name__.rpartition(".")[0]
    if importlib.util.find_spec(f"{package}.{stem}") is None:
        return None
    importlib.import_module(f"{package}.{stem}")
    return _REGISTRY.get(name) or _REGISTRY.get(key)


def names() -> list[str]:
    """Registered variant names, sorted."""
    _discover()
    return sorted(_REGISTRY)


def get(name: str) -> VariantSpec:
    """The :class:`VariantSpec` registered as ``name``.

    Raises
    ------
    UnknownNameError
        ``name`` is not registered (the message lists the known names).
    """
    spec = None
    if not _discovered and isinstance(name, str):
        # a built-in variant's module is named after it (``sync-ps``: ``sync_ps.py``): import
        # that one first, and all the others only when it does not register the name (the CLI
        # predicts one variant without importing every builder)
        spec = _own_module_spec(name)
    if spec is None:
        _discover()
        spec = _REGISTRY.get(name) if isinstance(name, str) else None
    if spec is None and isinstance(name, str):
        spec = _REGISTRY.get(name.strip().lower().replace("_", "-"))
    if spec is None:
        raise UnknownNameError(
            f"unknown variant {name!r}; known variants are {', '.join(names())}"
        )
    return spec


def build(name: str, model, cluster, granularity: str = "fine", **options):
    """Build the net of variant ``name`` for ``model`` on ``cluster``.

    Parameters
    ----------
    name : str
        A name from :func:`names`.
    model : str or ModelProfile
        A built-in model name (:func:`sgdnet.models.names`), a profile JSON path, or a profile.
    cluster : Cluster or dict
        The cluster (a dict is passed to ``Cluster(**d)``).
    granularity : {"fine", "coarse", "coarse+"}
        Fine-grained (per-layer operations) or coarse-grained (compute phase, then
        communication phase) model, or the coarse model with heuristics
        (:mod:`sgdnet.variants.coarse`; ``sync-ps``, ``async-ps``, ``allreduce``).
    **options
        Variant options; see ``get(name).options``. With ``"coarse+"`` also
        ``heuristics=CoarseHeuristics(...)`` (measured values; default: read from the profile).

    Returns
    -------
    Net
        A validated net; ``net.meta`` describes what it models. A fine net without an explicit
        ``max_layers`` that would exceed the memory budget (:mod:`sgdnet.variants.budget`) is
        built smaller and says so in a warning and ``net.meta["layer_fallback"]``: a sharded
        parameter server's layers under ``shard_min_bytes`` merged into the next first
        (``merged_small``), then layers merged into fewer groups.

    Raises
    ------
    UnknownNameError
        Unknown variant or model name.
    VariantError
        Unknown option, bad option value, or bad granularity.
    """
    return get(name).build(model, cluster, granularity, **options)
