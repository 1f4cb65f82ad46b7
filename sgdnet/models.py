"""The built-in model library: profiles shipped as ``models/*.json``.

>>> from sgdnet import models
>>> "resnet50" in models.names()
True
>>> models.load("resnet50").batch_size
128

The JSON files live in the repository's top-level ``models/`` directory, rebuilt by
``scripts/build_models.py``: ten CNN/GNMT profiles from the published PipeDream per-layer
measurements (an unnamed GPU, fp32; each layer carries the ops derived from its modules, so
:func:`sgdnet.workload.compute.retime` re-times them given ``from_device``), the
transformers ``bert_large``, ``gpt2_medium``, ``gpt2_xl`` and ``vit_l16``
(:mod:`sgdnet.workload.transformers`) and the CNNs ``resnet34``, ``resnet152``, ``vgg19`` and
``inception_v4`` (:mod:`sgdnet.workload.cnns`, V100, fp32, batch 64; Inception-v4 at 299x299
as tf_cnn_benchmarks builds it) from their architecture and the compute
model (each file states its sequence length or image size, batch, device and precision,
carries per-tensor sizes and ops, and can be re-timed with
:func:`sgdnet.workload.compute.retime`). The package reaches them as
``sgdnet/_models``, a symlink to ``../models`` that setuptools follows when it builds a wheel,
so they are package data of ``sgdnet`` in a regular install; in a source checkout without
symlink support the top-level ``models/`` is used directly.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from .errors import UnknownNameError
from .workload.profile import ModelProfile

__all__ = ["names", "load", "path", "models_dir"]


def models_dir() -> Path:
    """Directory holding the built-in ``*.json`` profiles."""
    here = Path(__file__).resolve().parent
    for d in (here / "_models", here.parent / "models"):
        if d.is_dir() and any(d.glob("*.json")):
            return d
    return here / "_models"


def names() -> list[str]:
    """Names of the built-in model profiles, sorted."""
    return sorted(p.stem for p in models_dir().glob("*.json"))


def path(name: str) -> Path:
    """Path of the JSON file of built-in model ``name``.

    Raises
    ------
    UnknownNameError
        ``name`` is not in :func:`names` (the message lists them).
    """
    known = names()
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in known:
        raise UnknownNameError(
            f"unknown model {name!r}; built-in models are {', '.join(known)} "
            "(or give the path of a profile JSON file)"
        )
    return models_dir() / f"{key}.json"


@lru_cache(maxsize=64)
def _load_builtin(name: str) -> ModelProfile:
    return ModelProfile.load(path(name))


def load(name: str | os.PathLike) -> ModelProfile:
    """Load a built-in profile by name, or any profile JSON file by path.

    Parameters
    ----------
    name : str or path-like
        A name from :func:`names` (case-insensitive), or a path to a ``.json`` file.

    Raises
    ------
    UnknownNameError
        Unknown name (the message lists the known ones).
    ProfileError
        The file is malformed (path, field and reason in the message).
    """
    if isinstance(name, os.PathLike) or (
            isinstance(name, str) and (name.endswith(".json") or os.sep in name)):
        return ModelProfile.load(name)
    if not isinstance(name, str):
        raise UnknownNameError(f"model name must be a string or a path, got {name!r}; built-in "
                               f"models are {', '.join(names())}")
    return _load_builtin(name.strip().lower())
