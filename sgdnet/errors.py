"""Exception hierarchy of sgdnet.

Every public entry point validates its input and raises a subclass of :class:`SgdnetError`
whose message names the offending value and says what would be valid.
"""

from __future__ import annotations

__all__ = [
    "SgdnetError",
    "UnitError",
    "DistributionError",
    "NetError",
    "DeadlockError",
    "SimulationError",
    "AnalysisError",
    "NotEventGraphError",
    "ProfileError",
    "ClusterError",
    "UnknownNameError",
    "VariantError",
    "StudyError",
    "TestbedError",
    "CalibrationError",
]


class SgdnetError(Exception):
    """Base class of every error raised by sgdnet on bad input or impossible requests."""


class UnitError(SgdnetError, ValueError):
    """A quantity with a unit could not be parsed or has the wrong dimension."""


class DistributionError(SgdnetError, ValueError):
    """A duration distribution got parameters outside its domain."""


class NetError(SgdnetError, ValueError):
    """A Petri net is structurally invalid.

    Parameters
    ----------
    problems : list of str
        Every problem found; the message lists them all.
    """

    def __init__(self, problems: list[str] | str, net_name: str | None = None):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        head = f"net {net_name!r}: " if net_name else ""
        if len(self.problems) == 1:
            msg = head + self.problems[0]
        else:
            msg = head + f"{len(self.problems)} problems:\n" + "\n".join(
                f"  - {p}" for p in self.problems
            )
        super().__init__(msg)


class SimulationError(SgdnetError, RuntimeError):
    """A simulation could not complete (bad arguments, event budget exhausted)."""


class DeadlockError(SimulationError):
    """The net reached a marking where nothing can fire and no operation is in progress.

    Attributes
    ----------
    marking : dict
        Place name -> token count at the deadlock.
    stuck : list of str
        Transitions that have some but not all of what they need.
    time : float
        Simulated time of the deadlock (seconds).
    replication : int
        Index of the replication that deadlocked.
    """

    def __init__(self, message: str, marking=None, stuck=None, time=None, replication=None):
        super().__init__(message)
        self.marking = dict(marking or {})
        self.stuck = list(stuck or [])
        self.time = time
        self.replication = replication


class AnalysisError(SgdnetError, ValueError):
    """An exact analysis was asked of a net it does not apply to."""


class NotEventGraphError(AnalysisError):
    """The net is not a timed event graph (a place or resource breaks the property)."""


class ProfileError(SgdnetError, ValueError):
    """A model profile is malformed (the message names the path and field)."""


class ClusterError(SgdnetError, ValueError):
    """A cluster description is invalid."""


class UnknownNameError(SgdnetError, KeyError):
    """A name (model, variant, resource, tag...) is not known; the message lists known ones."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class VariantError(SgdnetError, ValueError):
    """An SGD variant got options it cannot build a net from."""


class StudyError(SgdnetError, ValueError):
    """A batch study configuration is invalid."""


class TestbedError(SgdnetError, RuntimeError):
    """The emulated-cluster testbed or a calibration run could not be set up or failed (not
    root, ``ip``/``tc`` missing, a training process died); the message says what and why."""

    __test__ = False  # not a pytest test class despite its name


class CalibrationError(SgdnetError, ValueError):
    """Calibration measurements that no fit can be made from (too few sizes, non-positive
    times, a time that does not grow with size)."""
