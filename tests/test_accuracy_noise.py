"""The large-batch model against McCandlish et al. 2018 (arXiv:1812.06162): eq. 2.11
``(S / S_min - 1)(E / E_min - 1) = 1``, ``E = B S``, ``B_crit = E_min / S_min = B_noise``
(eq. 2.12), twice the minimum steps and examples at ``B = B_crit`` (Section 2.3), and the
simple noise scale ``tr(Sigma) / |G|^2`` (eq. 2.9) estimated from two batch sizes (Appendix
A.1) on a quadratic task whose ``Sigma`` and ``G`` are known exactly."""

from __future__ import annotations

import numpy as np
import pytest

from sgdnet.accuracy import (
    NoiseScaleModel,
    examples_for_batch,
    fit_steps,
    simple_noise_scale,
    steps_for_batch,
)
from sgdnet.errors import VariantError


def test_paper_relations():
    m = NoiseScaleModel(s_min=1000.0, b_noise=250.0)
    assert m.e_min == pytest.approx(250_000.0)
    for B in (1, 10, 64, 250, 1000, 1e5):
        S, E = m.steps(B), m.examples(B)
        assert E == pytest.approx(B * S, rel=1e-12)                     # E = B S
        assert (S / m.s_min - 1) * (E / m.e_min - 1) == pytest.approx(1.0, rel=1e-12)
    assert m.steps(250) == pytest.approx(2 * m.s_min)                  # at B_crit
    assert m.examples(250) == pytest.approx(2 * m.e_min)
    assert m.steps(1e12) == pytest.approx(m.s_min, rel=1e-9)           # S -> S_min
    assert m.examples(1e-9) == pytest.approx(m.e_min, rel=1e-9)        # E -> E_min
    assert steps_for_batch(50, 10, 100) == pytest.approx(30.0)
    assert examples_for_batch(50, 1000, 100) == pytest.approx(1500.0)


def test_fit_through_two_points():
    truth = NoiseScaleModel(300.0, 80.0)
    got = fit_steps(16, truth.steps(16), 64, truth.steps(64))
    assert got.s_min == pytest.approx(300.0) and got.b_noise == pytest.approx(80.0)
    assert got.steps(512) == pytest.approx(truth.steps(512))
    with pytest.raises(VariantError, match="two different batches"):
        fit_steps(16, 10, 16, 5)
    with pytest.raises(VariantError, match="do not follow"):
        fit_steps(16, 10, 64, 12)   # more steps with the larger batch
    with pytest.raises(VariantError, match="positive"):
        steps_for_batch(0, 1, 1)


class _Quadratic:
    """``l_i(theta) = |theta - x_i|^2 / 2``: per-example gradient ``theta - x_i``, so
    ``G = theta - mean(x)`` and ``Sigma`` is the covariance of the ``x_i`` (ddof 0)."""

    name = "quadratic"

    def __init__(self, d=10, n=4000, seed=0):
        rng = np.random.default_rng(seed)
        self.x = rng.normal(1.0, 2.0, size=(n, d))
        self.n_train = n
        self.d = d

    def init(self):
        return np.zeros(self.d)

    def gradient(self, p, idx):
        return p - self.x[idx].mean(axis=0)

    def apply(self, p, g, lr):
        return p - lr * g

    def loss(self, p):
        return 0.5 * float(np.mean(np.sum((p - self.x) ** 2, axis=1)))

    def accuracy(self, p):
        return 0.0


def test_simple_noise_scale_on_known_covariance():
    task = _Quadratic()
    theta = np.full(task.d, 0.5)
    G = theta - task.x.mean(axis=0)
    trS = float(np.trace(np.cov(task.x.T, ddof=0)))
    exact = trS / float(G @ G)            # about 10 * 4 / (10 * 0.25) = 16
    est = [simple_noise_scale(task, theta, b_small=4, b_big=256, pairs=400, seed=s)
           for s in range(5)]
    # the sd of the mean of 5 estimates is 1.3 % (40 seeds): the tolerance is about 4 sd
    assert np.mean(est) == pytest.approx(exact, rel=0.05)
