"""The arithmetic the testbed's PS performs, shared by the training programs and the calibration
(which times this very function for the per-tensor and per-byte update cost)."""

from __future__ import annotations

from typing import Any

__all__ = ["ps_apply"]


def ps_apply(param: Any, grad_sum: Any, count: int, lr: float) -> None:
    """The PS update of one layer: ``param -= lr * grad_sum / count`` (in place)."""
    param.add_(grad_sum, alpha=-lr / count)
