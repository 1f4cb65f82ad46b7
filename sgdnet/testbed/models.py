"""The small models the testbed trains (torch imported lazily by the caller's process).

Small on purpose: on a 2-core machine shared by several people the runs must be bound by the
emulated links (50-200 Mbit/s), not by compute, and must finish in seconds.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MODELS", "build", "param_layers"]

#: name -> layer widths of an MLP (input, hidden..., classes), ReLU between layers.
MODELS: dict[str, tuple[int, ...]] = {
    # 1.19 MB of float32 gradients in 4 layers of 525 KB, 525 KB, 132 KB and 5 KB
    "tb-mlp": (256, 512, 256, 128, 10),
    # 0.15 MB: for the CI smoke run
    "tb-tiny": (64, 256, 64, 10),
    # 1.46 MB in 7 layers: 132 KB, five of 263 KB, 10 KB (many equal layers where tb-mlp has
    # two large ones; link-bound at 75-250 Mbit/s like tb-mlp, issue #37's second model)
    "tb-deep": (128, 256, 256, 256, 256, 256, 256, 10),
}


def build(name: str, batch: int, seed: int = 0) -> tuple[Any, Any, Any]:
    """``(module, inputs, targets)``: the MLP ``name`` and one synthetic batch.

    The weights depend on ``seed`` only (every rank builds the same initial model); the data on
    ``seed`` too (the batch's content does not change the timing).
    """
    import torch
    from torch import nn

    from ..errors import UnknownNameError

    if name not in MODELS:
        raise UnknownNameError(f"unknown testbed model {name!r}; known: {sorted(MODELS)}")
    widths = MODELS[name]
    torch.manual_seed(seed)
    mods: list[Any] = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        mods.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            mods.append(nn.ReLU())
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, widths[0], generator=g)
    y = torch.randint(0, widths[-1], (batch,), generator=g)
    return nn.Sequential(*mods), x, y


def param_layers(module: Any) -> list[Any]:
    """Sub-modules that own parameters, in registration (forward) order: the 'layers' whose
    gradients are sent as one tensor each (the layers of ``profile_module``'s profile)."""
    return [m for m in module.modules() if any(True for _ in m.parameters(recurse=False))]
