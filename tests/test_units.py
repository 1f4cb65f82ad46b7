"""sgdnet.units: closed-form conversions and errors."""

import math

import pytest

from sgdnet import units
from sgdnet.errors import SgdnetError, UnitError


@pytest.mark.parametrize("text, expected", [
    ("3ms", 3e-3), ("50us", 50e-6), ("50µs", 50e-6), ("2s", 2.0), ("1.5 min", 90.0),
    ("1h", 3600.0), ("7ns", 7e-9), ("2.5e-3s", 2.5e-3), (" 4 ms ", 4e-3),
])
def test_seconds_strings(text, expected):
    assert units.seconds(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("value", [2.5, "2.5", " 2.5 ", 2.5e0])
def test_seconds_plain_number_is_seconds(value):
    assert units.seconds(value) == 2.5


@pytest.mark.parametrize("text, expected", [
    ("25MB", 25e6), ("1KB", 1e3), ("1kB", 1e3), ("1KiB", 1024.0), ("1.5GiB", 1.5 * 1024**3),
    ("800Mb", 100e6), ("8bit", 1.0), ("12bytes", 12.0), (1e6, 1e6), ("4096", 4096.0), (0, 0.0),
])
def test_nbytes(text, expected):
    assert units.nbytes(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text, expected", [
    ("10Gbps", 10e9 / 8), ("10Gbit/s", 10e9 / 8), ("1.25GB/s", 1.25e9), ("100Mbps", 12.5e6),
    ("1GiB/s", 1024.0**3), (1.25e9, 1.25e9), ("800", 800.0),
])
def test_bandwidth(text, expected):
    assert units.bandwidth(text) == pytest.approx(expected, rel=1e-12)


def test_parse_quantity_dispatch():
    assert units.parse_quantity("3ms", "time") == pytest.approx(3e-3)
    assert units.parse_quantity("2MB", "bytes") == 2e6
    assert units.parse_quantity("8Mbps", "rate") == 1e6
    with pytest.raises(UnitError, match="kind"):
        units.parse_quantity("3ms", "mass")


@pytest.mark.parametrize("fn, value, pattern", [
    (units.seconds, "3 parsecs", "unknown time unit"),
    (units.seconds, "abc", "cannot parse"),
    (units.seconds, "-1ms", "non-negative"),
    (units.nbytes, "5 furlongs", "unknown size unit"),
    (units.nbytes, "-3MB", "non-negative"),
    (units.bandwidth, "10Gb", "unknown rate unit"),
    (units.bandwidth, "10Gxps", "unknown rate unit"),
    (units.bandwidth, 0, "positive"),
    (units.bandwidth, "0Gbps", "positive"),
    (units.nbytes, math.nan, "not finite"),
    (units.nbytes, math.inf, "not finite"),
    (units.nbytes, True, "boolean"),
    (units.nbytes, [1], "list"),
])
def test_errors(fn, value, pattern):
    with pytest.raises(UnitError, match=pattern) as info:
        fn(value)
    assert isinstance(info.value, SgdnetError)
    assert repr(value) in str(info.value) or str(value) in str(info.value)


def test_allow_zero_false():
    with pytest.raises(UnitError, match="positive"):
        units.nbytes(0, allow_zero=False)
    with pytest.raises(UnitError, match="positive"):
        units.seconds("0ms", allow_zero=False)


def test_what_names_the_quantity():
    with pytest.raises(UnitError, match="latency"):
        units.seconds("5 lightyears", what="latency")


def test_format():
    assert units.format_seconds(0.0031) == "3.1 ms"
    assert units.format_seconds(2.0) == "2 s"
    assert units.format_seconds(5e-6) == "5 us"
    assert units.format_seconds(3e-9) == "3 ns"
    assert units.format_bytes(25e6) == "25 MB"
    assert units.format_bytes(1.5e9) == "1.5 GB"
    assert units.format_bytes(12) == "12 B"
