"""The row schema of a study: parameter keys and their canonical form, the row id and the row
seed (derived from the study seed and the row's parameters only), the call a row makes, and the
metric columns of a row (:func:`summarize`, speed-up against the 1-worker baseline).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._check import finite_or_none as _finite
from ..errors import StudyError

__all__ = ["METRIC_COLUMNS", "row_id", "row_seed", "summarize", "row_target"]

#: Fixed metric columns of a row, in table order (``util_*`` columns follow ``efficiency``).
METRIC_COLUMNS = (
    "seed", "n",
    "steps_per_s_mean", "steps_per_s_lo", "steps_per_s_hi", "steps_per_s_std",
    "steps_per_s_p05", "steps_per_s_p50", "steps_per_s_p95",
    "samples_per_s_mean", "samples_per_s_lo", "samples_per_s_hi",
    "speed_up", "efficiency",
)
_TAIL_COLUMNS = ("seeds", "error")
_METRIC_SET = set(METRIC_COLUMNS)
_RESERVED = {"row_id", "seed", "runner", *METRIC_COLUMNS, *_TAIL_COLUMNS}
_TOP_KEYS = {"variant", "model", "cluster"}
_MODEL_FIELDS = ("batch_size", "speed", "cv")
#: ``target.<field>`` axes (time to accuracy, :class:`sgdnet.accuracy.Target`; ``acc`` is
#: ``accuracy``)
_TARGET_FIELDS = ("task", "loss", "accuracy", "acc", "lr", "seed", "eval_every", "window")
_CONFIG_KEYS = {"grid", "configs", "fixed", "replications", "seed", "out", "name", "on_error",
               "common_random_numbers"}
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


# ---------------------------------------------------------------------------- parameters
def _cluster_fields() -> list[str]:
    from ..workload.cluster import Cluster

    return [f.name for f in dataclasses.fields(Cluster)]


def _canon(value: Any, where: str) -> Any:
    """JSON-able canonical form of a parameter value (used for row keys and seeds)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        return float(value)
    if hasattr(value, "item") and callable(value.item) and not hasattr(value, "__len__"):
        return _canon(value.item(), where)  # numpy scalars
    if isinstance(value, Mapping):
        return {str(k): _canon(v, where) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canon(v, where) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _canon(to_dict(), where)
    raise StudyError(f"{where}: value {value!r} of type {type(value).__name__} cannot be part of a "
                     "study; give numbers, strings, lists or dicts (or objects with to_dict())")


#: Cluster fields written with units (``"10Gbps"``, ``"50us"``): the table keeps the label and
#: a numeric column beside it (``cluster.bandwidth_Bps``), so sorting and plotting use numbers.
_UNIT_COLUMNS = {"bandwidth": ("rate", "Bps"), "uplink": ("rate", "Bps"),
                 "downlink": ("rate", "Bps"), "ps_bandwidth": ("rate", "Bps"),
                 "latency": ("time", "s"), "shard_min_bytes": ("bytes", "B")}


def numeric_columns(params: Mapping[str, Any]) -> dict[str, float]:
    """``{"cluster.bandwidth_Bps": 1.25e9, ...}`` for the unit-bearing cluster parameters of a
    row given as text (numbers are already numeric; unparsable text is left to the runner)."""
    from ..errors import SgdnetError
    from ..units import parse_quantity

    out: dict[str, float] = {}
    for key, value in params.items():
        head, _, field = key.partition(".")
        if head != "cluster" or field not in _UNIT_COLUMNS or not isinstance(value, str):
            continue
        kind, suffix = _UNIT_COLUMNS[field]
        try:
            out[f"{key}_{suffix}"] = float(parse_quantity(value, kind))
        except SgdnetError:
            continue
    return out


def _display(value: Any) -> Any:
    """A scalar for the tidy table: scalars as they are, named objects by name, rest as JSON."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    name = getattr(value, "name", None)
    if isinstance(name, str) and hasattr(value, "layers"):
        return name  # a ModelProfile
    return json.dumps(_canon(value, "value"), sort_keys=True, separators=(",", ":"))


def _flatten(params: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Normalise a configuration: ``cluster`` dicts/objects become ``cluster.<field>`` keys."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if not isinstance(key, str):
            raise StudyError(f"{where}: parameter name {key!r} must be a string")
        if key == "cluster" and value is not None:
            if isinstance(value, Mapping):
                items = dict(value)
            elif hasattr(value, "to_dict") and dataclasses.is_dataclass(value):
                from ..workload.cluster import Cluster

                default = Cluster().to_dict()
                items = {k: getattr(value, k) for k, v in value.to_dict().items()
                         if v != default.get(k)}
            else:
                raise StudyError(f"{where}: cluster={value!r} must be a dict of Cluster fields or a "
                                 "Cluster; or vary single fields as 'cluster.<field>'")
            for k, v in items.items():
                out[f"cluster.{k}"] = v
        else:
            out[key] = value
    return out


def _check_keys(params: Mapping[str, Any], where: str) -> None:
    fields = None
    for key in params:
        if not isinstance(key, str) or not _KEY_RE.match(key):
            raise StudyError(f"{where}: {key!r} is not a parameter name; use a predict keyword "
                             "('variant', 'steps', ...), 'cluster.<field>' or 'model.<field>'")
        if key in _RESERVED:
            hint = ("the study derives each row's seed from Study(seed=...)" if key == "seed"
                    else "it is a column the study computes")
            raise StudyError(f"{where}: {key!r} cannot be a study parameter ({hint})")
        head, _, field = key.partition(".")
        if not field:
            continue
        if head == "cluster":
            fields = fields or _cluster_fields()
            if field not in fields:
                raise StudyError(f"{where}: 'cluster.{field}' is not a Cluster field; fields are "
                                 f"{', '.join(fields)}")
        elif head == "model":
            if field not in _MODEL_FIELDS:
                raise StudyError(f"{where}: 'model.{field}' cannot be varied; model fields are "
                                 f"{', '.join('model.' + f for f in _MODEL_FIELDS)}")
        elif head == "target":
            if field not in _TARGET_FIELDS:
                raise StudyError(f"{where}: 'target.{field}' is not a target field; fields are "
                                 f"{', '.join('target.' + f for f in _TARGET_FIELDS)}")
        else:
            raise StudyError(f"{where}: {key!r}: dotted names must start with 'cluster.', "
                             "'model.' or 'target.'")


def _canon_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def row_id(params: Mapping[str, Any], study_seed: int, common: bool = False) -> str:
    """The key of a row: 16 hex digits of SHA-256 over its canonical parameters and study seed.

    Parameters
    ----------
    params : mapping
        Flat parameters of the row (as in :meth:`Study.configs`).
    study_seed : int
        The study seed.
    common : bool
        The study runs its rows under common random numbers (then part of the key, so a table
        of the other kind is not resumed as if its rows were these).

    Returns
    -------
    str
    """
    key: dict[str, Any] = {"params": _canon(dict(params), "row"), "study_seed": int(study_seed)}
    if common:
        key["common_random_numbers"] = True
    return hashlib.sha256(_canon_json(key).encode()).hexdigest()[:16]


def row_seed(params: Mapping[str, Any], study_seed: int, common: bool = False) -> int:
    """Seed of a row, a deterministic function of its parameters and the study seed.

    ``SeedSequence([study_seed, *sha256(canonical JSON of params) as 8 uint32 words])`` gives a
    63-bit integer; the position of the row in the grid and the executor play no part. With
    ``common``, every row gets the same seed (the study seed's alone): rows then draw the same
    numbers for the transitions their nets share by name (common random numbers, see
    :mod:`sgdnet.engine.rng`), so differences between rows carry less noise.

    Parameters
    ----------
    params : mapping
        Flat parameters of the row.
    study_seed : int
        The study seed (>= 0).
    common : bool
        One seed for every row.

    Returns
    -------
    int
        In ``[0, 2**63)``.
    """
    import numpy as np

    canon = {"common_random_numbers": True} if common else _canon(dict(params), "row")
    digest = hashlib.sha256(_canon_json(canon).encode()).digest()
    words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4)]
    ss = np.random.SeedSequence([int(study_seed), *words])
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))


def row_target(params: Mapping[str, Any]) -> Any:
    """The time-to-accuracy target of a row (:class:`sgdnet.accuracy.Target`), or None: its
    ``target`` (a spelling ``"logreg:loss=0.4"``, a mapping of Target fields or a Target) with
    its ``target.<field>`` values over it (``target.loss`` replaces an accuracy, and the
    reverse; without ``target`` the task is ``logreg``).

    Raises
    ------
    StudyError
        A target that does not parse or that :class:`~sgdnet.accuracy.Target` refuses.
    """
    fields = {("accuracy" if k == "target.acc" else k[len("target."):]): v
              for k, v in params.items() if k.startswith("target.")}
    base = params.get("target")
    if base is None and not fields:
        return None
    import dataclasses as dc

    from ..accuracy.target import Target, parse_target
    from ..errors import SgdnetError

    try:
        if base is None:
            base_kw: dict[str, Any] = {"task": "logreg"}
        elif isinstance(base, Mapping):
            base_kw = {("accuracy" if k == "acc" else str(k)): v for k, v in base.items()}
        else:
            t = base if isinstance(base, Target) else parse_target(base)
            base_kw = {f.name: getattr(t, f.name) for f in dc.fields(Target)}
        if "loss" in fields:
            base_kw.pop("accuracy", None)
        if "accuracy" in fields:
            base_kw.pop("loss", None)
        base_kw.update(fields)
        return Target(**base_kw)
    except (SgdnetError, TypeError) as e:
        msg = e.args[0] if e.args else e
        raise StudyError(f"study row target {base!r} {fields or ''}: {msg}") from None


def _build_call(params: Mapping[str, Any]) -> tuple[Any, Any, Any, dict]:
    """``(variant, model, cluster, kwargs)`` for the runner from flat parameters (a row with a
    ``target`` or ``target.<field>`` passes ``target=`` a :class:`sgdnet.accuracy.Target`)."""
    kwargs: dict[str, Any] = {}
    cluster_kw: dict[str, Any] = {}
    model_kw: dict[str, Any] = {}
    target = row_target(params)
    if target is not None:
        kwargs["target"] = target
    for key, value in params.items():
        head, _, field = key.partition(".")
        if head == "cluster" and field:
            cluster_kw[field] = value
        elif head == "model" and field:
            model_kw[field] = value
        elif head == "target":
            continue
        elif key not in _TOP_KEYS:
            kwargs[key] = value
    variant = params.get("variant")
    model = params.get("model")
    if variant is None:
        raise StudyError("study row has no 'variant'; put it in the grid or in fixed "
                         "(e.g. fixed={'variant': 'sync-ps'})")
    if model is None:
        raise StudyError("study row has no 'model'; put it in the grid or in fixed "
                         "(e.g. fixed={'model': 'resnet50'})")
    if model_kw:
        model = _modified_model(model, model_kw)
    from ..workload.cluster import Cluster

    if "straggler" in cluster_kw and cluster_kw["straggler"] is not None:
        from ..workload.stragglers import from_spec

        cluster_kw["straggler"] = from_spec(cluster_kw["straggler"])
    if "speeds" in cluster_kw and isinstance(cluster_kw["speeds"], list):
        cluster_kw["speeds"] = tuple(cluster_kw["speeds"])
    cluster = Cluster(**cluster_kw)
    return variant, model, cluster, kwargs


def _modified_model(model: Any, fields: Mapping[str, Any]) -> Any:
    from ..workload.profile import ModelProfile

    if not isinstance(model, ModelProfile):
        from .. import models

        model = models.load(model)
    if "batch_size" in fields or "speed" in fields:
        model = model.scaled(batch_size=fields.get("batch_size"), speed=fields.get("speed", 1.0))
    if "cv" in fields:
        model = ModelProfile(model.name, model.layers, model.batch_size, model.device,
                             model.source, fields["cv"], model.meta)
    return model


def summarize(prediction: Any, *, level: float = 0.95,
              quantiles: Sequence[float] = (0.05, 0.5, 0.95)) -> dict[str, Any]:
    """Flatten what a runner returned into the metric columns of a study row.

    A mapping is taken as already-flat metric columns (for custom runners; lists and dicts
    become canonical JSON text); anything else is a :class:`~sgdnet.Prediction` flattened by
    :func:`sgdnet.prediction.summarize` (``level``: confidence level of the ``_lo`` / ``_hi``
    columns; ``quantiles`` of the per-replication steps/s, ``steps_per_s_pNN``).
    """
    if isinstance(prediction, Mapping):
        out = {}
        for k, v in prediction.items():
            if isinstance(v, (list, tuple, dict)):
                v = json.dumps(_canon(v, k), separators=(",", ":"))
            elif v is not None and not isinstance(v, (bool, int, float, str)):
                v = _finite(v)
            out[str(k)] = v
        return out
    from ..prediction import summarize as flatten

    return flatten(prediction, level=level, quantiles=quantiles)


def _speedup(row: dict[str, Any], base: Mapping[str, Any] | None, workers: Any) -> None:
    if base is None or row.get("error") or base.get("error"):
        return
    x, b = _finite(row.get("samples_per_s_mean")), _finite(base.get("samples_per_s_mean"))
    if x is None or not b:
        return
    su = x / b
    row["speed_up"] = su
    row["efficiency"] = su / workers if isinstance(workers, int) and workers > 0 else None
