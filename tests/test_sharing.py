"""sgdnet.testbed.sharing: the fluid models that read TCP's sharing from staggered messages."""

import math

import pytest

from sgdnet.errors import TestbedError
from sgdnet.testbed.sharing import fairness_index, fit_beta, fluid_ends

S, B = 1.0e6, 1.0e7  # 1 MB messages on a 10 MB/s link: 0.1 s alone


@pytest.mark.parametrize("d", [0.0, 0.02, 0.07])
def test_two_messages_max_min_and_fifo_closed_forms(d):
    """Two messages, the second ``d`` later: max-min ends the first at ``2S/B - d`` (alone for
    ``d``, then half the link) and the second at ``2S/B``; FIFO at ``S/B`` and ``2S/B`` (the
    same at ``d = 0``: messages that start together share, whatever beta)."""
    fair = fluid_ends([0.0, d], S, B, 1.0)
    fifo = fluid_ends([0.0, d], S, B, 0.0)
    assert fair == pytest.approx([2 * S / B - d, 2 * S / B])
    assert fifo == pytest.approx([2 * S / B if d == 0 else S / B, 2 * S / B])


def test_age_weight_between_the_two_and_monotonic():
    """beta = 0.5, second message 0.02 s later: the first has the link alone for 0.02 s (0.2 MB),
    then 2/3 of it, so it ends 0.8 MB / (2/3 B) = 0.12 s later; the last end is the total's."""
    e = fluid_ends([0.0, 0.02], S, B, 0.5)
    assert e == pytest.approx([0.02 + 0.8e6 / (B * 2 / 3), 2 * S / B])
    firsts = [fluid_ends([0.0, 0.02, 0.05], S, B, b)[0] for b in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert firsts == sorted(firsts) and firsts[0] < firsts[-1]


def test_order_of_starts_does_not_matter_and_gaps_idle_the_link():
    assert fluid_ends([0.03, 0.0], S, B, 1.0) == pytest.approx(fluid_ends([0.0, 0.03], S, B, 1.0)[::-1])
    assert fluid_ends([0.0, 0.5], S, B, 1.0) == pytest.approx([0.1, 0.6])  # never overlap


def test_index_and_fit_recover_the_model_they_come_from():
    starts = [0.0, 0.025, 0.05, 0.075]
    for beta in (0.0, 0.4, 1.0):
        ends = fluid_ends(starts, S, B, beta)
        idx = fairness_index(starts, ends, S, B)
        assert math.isnan(idx[-1])  # the last message ends at the total's time in every model
        if beta in (0.0, 1.0):
            assert idx[:3] == pytest.approx([beta] * 3)
        b, rms = fit_beta([(starts, ends)], S, B)
        assert b == pytest.approx(beta) and rms == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("kw, match", [({"beta": 1.5}, "beta=1.5"), ({"size": 0}, "size=0"),
                                       ({"rate": float("inf")}, "rate=inf")])
def test_bad_values_are_refused_by_name(kw, match):
    args = {"starts": [0.0], "size": S, "rate": B, "beta": 1.0, **kw}
    with pytest.raises(TestbedError, match=match):
        fluid_ends(**args)
    with pytest.raises(TestbedError, match="no message starts"):
        fluid_ends([], S, B)
    with pytest.raises(TestbedError, match="no runs"):
        fit_beta([], S, B)
