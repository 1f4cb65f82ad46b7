"""The large-batch efficiency model of McCandlish, Kaplan, Amodei et al., "An Empirical Model
of Large-Batch Training" (arXiv:1812.06162, 2018).

To reach a given loss, SGD with batch ``B`` (and a learning rate tuned for it) takes

* ``S(B) = S_min (1 + B_noise / B)`` optimisation steps (their eq. 2.11 solved for S), and
* ``E(B) = B S(B) = E_min (1 + B / B_noise)`` training examples,

with ``E_min = B_noise S_min`` (so the critical batch ``B_crit = E_min / S_min`` equals
``B_noise``, their eq. 2.12) and ``(S / S_min - 1)(E / E_min - 1) = 1`` (eq. 2.11).
``B_noise`` is estimated by the *simple noise scale* ``B_simple = tr(Sigma) / |G|^2`` (eq. 2.9),
``G`` the true gradient and ``Sigma`` the per-example gradient covariance, itself estimated
from the squared norms of gradients over two batch sizes (their Appendix A.1):
``|G|^2 ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)`` and
``tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)``.

:func:`fit_steps` fits ``(S_min, B_noise)`` through the steps measured at two batch sizes
(two sequential replays), which is what :func:`sgdnet.accuracy.time_to_accuracy` uses for
synchronous schemes when a replay would be too long.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import VariantError
from .tasks import get_task

__all__ = ["NoiseScaleModel", "steps_for_batch", "examples_for_batch", "fit_steps",
           "simple_noise_scale"]


def _pos(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or \
            not x > 0 or not math.isfinite(float(x)):
        raise VariantError(f"{name}={x!r} must be a positive finite number")
    return float(x)


def steps_for_batch(batch: float, s_min: float, b_noise: float) -> float:
    """``S(B) = S_min (1 + B_noise / B)``: steps to the target with batch ``B``."""
    B = _pos("batch", batch)
    return _pos("s_min", s_min) * (1.0 + _pos("b_noise", b_noise) / B)


def examples_for_batch(batch: float, e_min: float, b_noise: float) -> float:
    """``E(B) = E_min (1 + B / B_noise)``: training examples to the target with batch ``B``."""
    B = _pos("batch", batch)
    return _pos("e_min", e_min) * (1.0 + B / _pos("b_noise", b_noise))


@dataclass(frozen=True)
class NoiseScaleModel:
    """``S(B) = S_min (1 + B_noise / B)`` for one task, learning rate and target.

    Attributes
    ----------
    s_min : float
        Steps at infinite batch.
    b_noise : float
        The noise scale (= the critical batch ``E_min / S_min``).
    """

    s_min: float
    b_noise: float

    @property
    def e_min(self) -> float:
        """Examples at batch -> 0: ``B_noise S_min``."""
        return self.s_min * self.b_noise

    def steps(self, batch: float) -> float:
        """Steps to the target with batch ``batch``."""
        return steps_for_batch(batch, self.s_min, self.b_noise)

    def examples(self, batch: float) -> float:
        """Examples to the target with batch ``batch``."""
        return examples_for_batch(batch, self.e_min, self.b_noise)


def fit_steps(b1: float, s1: float, b2: float, s2: float) -> NoiseScaleModel:
    """``(S_min, B_noise)`` through two measured points ``S(b1) = s1``, ``S(b2) = s2``.

    ``S = S_min + (S_min B_noise) / B`` is linear in ``1 / B``: the slope is
    ``S_min B_noise = (s1 - s2) / (1 / b1 - 1 / b2)``, the intercept ``S_min``.

    Raises
    ------
    VariantError
        Equal batches, or points the model cannot pass through (steps not decreasing with
        the batch).
    """
    b1, s1, b2, s2 = (_pos(n, x) for n, x in (("b1", b1), ("s1", s1), ("b2", b2), ("s2", s2)))
    if b1 == b2:
        raise VariantError(f"fit_steps needs two different batches, got b1 = b2 = {b1:g}")
    slope = (s1 - s2) / (1.0 / b1 - 1.0 / b2)
    s_min = s1 - slope / b1
    if not (slope > 0 and s_min > 0):
        raise VariantError(f"steps S({b1:g}) = {s1:g}, S({b2:g}) = {s2:g} do not follow "
                           "S = S_min (1 + B_noise / B) with S_min, B_noise > 0 (the larger "
                           "batch must need fewer steps, and S_min = s1 - (s1 - s2) / "
                           "(1 - b1 / b2) must be positive); use method='replay'")
    return NoiseScaleModel(s_min, slope / s_min)


def simple_noise_scale(task, params=None, b_small: int = 8, b_big: int = 512,
                       pairs: int = 64, seed: int = 0) -> float:
    """``B_simple = tr(Sigma) / |G|^2`` at ``params`` from gradients of two batch sizes.

    Averages ``|G_B|^2`` over ``pairs`` batches of each size (sampled with replacement, so
    ``E|G_B|^2 = |G|^2 + tr(Sigma) / B`` exactly) and solves the two equations (McCandlish et
    al., Appendix A.1).
    """
    tk = get_task(task)
    p = np.asarray(tk.init() if params is None else params, dtype=float)
    rng = np.random.default_rng(seed)
    n2 = {}
    for b in (int(b_small), int(b_big)):
        n2[b] = float(np.mean([np.sum(tk.gradient(p, rng.integers(0, tk.n_train, b)) ** 2)
                               for _ in range(int(pairs))]))
    bs, bb = int(b_small), int(b_big)
    g2 = (bb * n2[bb] - bs * n2[bs]) / (bb - bs)
    tr = (n2[bs] - n2[bb]) / (1.0 / bs - 1.0 / bb)
    return tr / g2
