"""The formalism: Net builder and validation (``builder``), compiled arrays (``compiled``),
networkx view (``graph``) and PNML interchange (``pnml``)."""

from .builder import DISCIPLINES, GATE_KINDS, Gate, Modulator, Net, Place, Resource, Transition

__all__ = ["Net", "Place", "Resource", "Transition", "Gate", "Modulator", "DISCIPLINES", "GATE_KINDS"]
