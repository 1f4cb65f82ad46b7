"""Duration distributions: constructors, validation errors, moments against closed forms
(independent formulas from scipy.stats), sampling (KS tests and CI-derived tolerances with fixed
seeds), scaling, dict round-trips and the kernel's flatten() layout."""

import math

import numpy as np
import pytest
from scipy import stats

from sgdnet import dists
from sgdnet.dists import (
    N_PARAMS,
    Deterministic,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    Normal,
    ShiftedExponential,
    Straggler,
    Uniform,
    as_distribution,
    flatten,
    from_dict,
)
from sgdnet.errors import DistributionError, SgdnetError

N = 200_000
ALPHA = 1e-3


def _straggler_exp_cdf(mean, p, factor):
    return lambda x: (1 - p) * stats.expon.cdf(x, scale=mean) + p * stats.expon.cdf(x, scale=mean * factor)


# (distribution, scipy frozen law giving the closed-form mean/var and the CDF for a KS test)
CASES = {
    "exp": (Exponential(2.0), stats.expon(scale=2.0)),
    "unif": (Uniform(1.0, 4.0), stats.uniform(1.0, 3.0)),
    "norm": (Normal(1.0, 0.8), stats.truncnorm(-1.0 / 0.8, np.inf, loc=1.0, scale=0.8)),
    "lognorm": (LogNormal(3.0, 0.5), stats.lognorm(s=math.sqrt(math.log(1.25)), scale=3.0 / math.sqrt(1.25))),
    "gamma": (Gamma(2.0, 0.5), stats.gamma(4.0, scale=0.5)),
    "shexp": (ShiftedExponential(1.0, 1.5), stats.expon(loc=1.0, scale=0.5)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mean_and_variance_match_closed_forms(name):
    d, law = CASES[name]
    assert d.mean == pytest.approx(law.mean(), rel=1e-12)
    assert d.var == pytest.approx(law.var(), rel=1e-12)
    assert d.cv == pytest.approx(law.std() / law.mean(), rel=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_samples_follow_the_law(name):
    d, law = CASES[name]
    x = d.sample(np.random.default_rng(12345), N)
    assert x.shape == (N,) and np.all(x >= 0)
    # the sample mean within 4 standard errors of the closed-form mean
    assert abs(x.mean() - law.mean()) < 4 * law.std() / math.sqrt(N)
    # the sample variance within 4 standard errors (SE from the 4th central moment)
    m4 = np.mean((x - x.mean()) ** 4)
    assert abs(x.var() - law.var()) < 4 * math.sqrt((m4 - x.var() ** 2) / N)
    assert stats.kstest(x, law.cdf).pvalue > ALPHA


def test_scalar_sample_is_a_float():
    rng = np.random.default_rng(0)
    for d, _ in CASES.values():
        v = d.sample(rng)
        assert np.ndim(v) == 0 and float(v) >= 0


def test_deterministic_and_gamma_cv0_are_constant():
    rng = np.random.default_rng(1)
    for d in (Deterministic(0.25), Gamma(0.25, 0.0)):
        x = d.sample(rng, 100)
        assert np.all(x == 0.25) and d.var == 0 and d.cv == 0
    assert Deterministic(0).cv == 0.0


def test_straggler_mixture():
    d = Straggler(Exponential(1.0), p=0.2, factor=5.0)
    # E = m (1 - p + p f); E[X^2] = 2 m^2 (1 - p + p f^2)
    assert d.mean == pytest.approx(1.8)
    assert d.var == pytest.approx(2 * (0.8 + 0.2 * 25) - 1.8**2)
    x = d.sample(np.random.default_rng(7), N)
    assert abs(x.mean() - d.mean) < 4 * math.sqrt(d.var / N)
    assert stats.kstest(x, _straggler_exp_cdf(1.0, 0.2, 5.0)).pvalue > ALPHA
    det = Straggler(2.0, p=0.25, factor=3.0)  # deterministic base: values 2 or 6 only
    y = det.sample(np.random.default_rng(8), 40_000)
    assert set(np.unique(y)) == {2.0, 6.0}
    frac = np.mean(y == 6.0)
    assert abs(frac - 0.25) < 4 * math.sqrt(0.25 * 0.75 / y.size)


def test_empirical_resamples_uniformly():
    obs = [0.1, 0.2, 0.2, 0.7]
    d = Empirical(obs)
    assert d.mean == pytest.approx(0.3) and d.var == pytest.approx(np.var(obs))
    x = d.sample(np.random.default_rng(3), 80_000)
    vals, counts = np.unique(x, return_counts=True)
    assert list(vals) == [0.1, 0.2, 0.7]
    assert stats.chisquare(counts, np.array([0.25, 0.5, 0.25]) * x.size).pvalue > ALPHA


def test_normal_mean_is_the_truncated_mean():
    d = Normal(0.5, 1.0)  # heavily truncated: the mean is well above mu
    law = stats.truncnorm(-0.5, np.inf, loc=0.5, scale=1.0)
    assert d.mean == pytest.approx(law.mean(), rel=1e-12) and d.mean > 0.9
    assert Normal(1.0, 0.0).mean == 1.0 and Normal(1.0, 0.0).var == 0.0


def test_lognormal_params_give_mean_and_cv():
    d = LogNormal(0.02, 1.5)
    mu, sigma = d._params()
    assert math.exp(mu + sigma**2 / 2) == pytest.approx(0.02, rel=1e-12)
    assert math.sqrt(math.exp(sigma**2) - 1) == pytest.approx(1.5, rel=1e-12)


def test_time_strings_are_parsed():
    assert Exponential("10ms").mean == pytest.approx(0.01)
    assert Uniform("1us", "3us").mean == pytest.approx(2e-6)
    assert as_distribution("3ms") == Deterministic(0.003)
    assert as_distribution(2) == Deterministic(2.0)
    d = Exponential(1.0)
    assert as_distribution(d) is d
    assert as_distribution({"type": "Gamma", "mean": 1.0, "cv": 0.5}) == Gamma(1.0, 0.5)


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: Deterministic(-1.0), "-1.0"),
        (lambda: Exponential(0.0), "mean=0.0"),
        (lambda: Exponential(-2), "-2"),
        (lambda: Exponential(float("nan")), "nan"),
        (lambda: Exponential(math.inf), "inf"),
        (lambda: Exponential("fast"), "fast"),
        (lambda: Uniform(3.0, 1.0), "high=1.0"),
        (lambda: Uniform(-1.0, 1.0), "-1.0"),
        (lambda: Normal(0.0, 1.0), "mu=0.0"),
        (lambda: Normal(1.0, -0.5), "-0.5"),
        (lambda: LogNormal(1.0, -0.1), "-0.1"),
        (lambda: LogNormal(1.0, 1000.0), "1000.0"),
        (lambda: LogNormal(0.0, 0.5), "mean=0.0"),
        (lambda: Gamma(-1.0, 0.5), "-1.0"),
        (lambda: Gamma(1.0, 500.0), "500.0"),
        (lambda: ShiftedExponential(2.0, 1.0), "shift=2.0"),
        (lambda: ShiftedExponential(-1.0, 1.0), "-1.0"),
        (lambda: Empirical([]), "empty"),
        (lambda: Empirical([0.1, -0.3]), "-0.3"),
        (lambda: Empirical([0.1, float("nan")]), "NaN"),
        (lambda: Straggler(1.0, 1.5, 2.0), "p=1.5"),
        (lambda: Straggler(1.0, 0.1, 0.0), "factor=0.0"),
        (lambda: Straggler(Straggler(1.0, 0.1, 2.0), 0.1, 2.0), "Straggler"),
        (lambda: as_distribution(object()), "object"),
        (lambda: as_distribution(True), "True"),
        (lambda: from_dict({"type": "Weibull", "k": 2}), "Weibull"),
        (lambda: from_dict({"type": "Exponential", "rate": 2}), "rate"),
        (lambda: Exponential(1.0).scaled(0), "factor=0"),
    ],
)
def test_bad_parameters_raise_distribution_error_naming_the_value(make, fragment):
    with pytest.raises(DistributionError) as e:
        make()
    assert isinstance(e.value, SgdnetError) and isinstance(e.value, ValueError)
    assert fragment in str(e.value)


ALL = [
    Deterministic(0.5), Exponential(1.0), Uniform(0.5, 1.5), Normal(1.0, 0.3), LogNormal(1.0, 0.4),
    Gamma(1.0, 0.7), Gamma(2.0, 0.0), ShiftedExponential(0.2, 1.0), Empirical([0.5, 1.0, 2.0]),
    Straggler(Exponential(1.0), 0.1, 4.0), Straggler(Empirical([1.0, 3.0]), 0.5, 2.0),
]


@pytest.mark.parametrize("d", ALL, ids=lambda d: type(d).__name__)
def test_scaled_multiplies_every_duration(d):
    s = d.scaled(2.5)
    assert type(s) is type(d)
    assert s.mean == pytest.approx(2.5 * d.mean, rel=1e-12)
    assert s.var == pytest.approx(6.25 * d.var, rel=1e-12, abs=1e-15)
    assert s.cv == pytest.approx(d.cv, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("d", ALL, ids=lambda d: type(d).__name__)
def test_dict_round_trip(d):
    back = from_dict(d.to_dict())
    assert back == d and hash(back) == hash(d)
    assert back.mean == d.mean and repr(back) == repr(d)


def test_flatten_layout():
    emp1, emp2 = Empirical([1.0, 2.0, 3.0]), Empirical([5.0, 6.0])
    ds = [
        Deterministic(0.5), Exponential(2.0), Uniform(1.0, 3.0), Normal(1.0, 0.2), LogNormal(2.0, 0.5),
        Gamma(2.0, 0.5), Gamma(3.0, 0.0), ShiftedExponential(1.0, 4.0), emp1,
        Straggler(Exponential(2.0), 0.1, 4.0), Straggler(emp2, 0.3, 2.0),
    ]
    codes, params, pool = flatten(ds)
    assert codes.dtype == np.int64 and params.dtype == np.float64 and params.shape == (len(ds), N_PARAMS)
    assert codes.tolist() == [
        dists.CODE_DET, dists.CODE_EXP, dists.CODE_UNIF, dists.CODE_NORM, dists.CODE_LOGN,
        dists.CODE_GAMMA, dists.CODE_GAMMA, dists.CODE_SHEXP, dists.CODE_EMP, dists.CODE_STRAG, dists.CODE_STRAG,
    ]
    assert [dists.CODE_DET, dists.CODE_EXP, dists.CODE_UNIF, dists.CODE_NORM, dists.CODE_LOGN] == [0, 1, 2, 3, 4]
    assert [dists.CODE_GAMMA, dists.CODE_SHEXP, dists.CODE_EMP, dists.CODE_STRAG] == [5, 6, 7, 8]
    s2 = math.log(1.25)
    expected = [
        [0.5], [2.0], [1.0, 3.0], [1.0, 0.2], [math.log(2.0) - s2 / 2, math.sqrt(s2)],
        [4.0, 0.5],  # shape 1/cv^2, scale mean/shape
        [0.0, 3.0],  # cv = 0: [0, mean]
        [1.0, 3.0],  # shift, exponential part's mean
        [0.0, 3.0],  # offset, length into the pool
        [0.1, 4.0, dists.CODE_EXP, 2.0, 0.0, 0.0],
        [0.3, 2.0, dists.CODE_EMP, 3.0, 2.0, 0.0],  # Empirical base: (offset, length) in columns 3, 4
    ]
    for row, exp in zip(params, expected):
        np.testing.assert_allclose(row[: len(exp)], exp, rtol=1e-15)
        assert np.all(row[len(exp):] == 0)
    assert pool.tolist() == [1.0, 2.0, 3.0, 5.0, 6.0]
    _, _, empty = flatten([Exponential(1.0)])
    assert empty.shape == (1,)  # never an empty array (numba-friendly)


def test_a_bad_time_unit_names_the_valid_units():
    from sgdnet import DistributionError, dists

    with pytest.raises(DistributionError, match=r"'3xs'.*unknown time unit 'xs'.*ms, us"):
        dists.as_distribution("3xs")
