"""The formalism: Net builder and validation (``builder``), compiled arrays (``compiled``),
networkx view (``graph``) and PNML interchange (``pnml``)."""

from .builder import DISCIPLINES, GATE_KINDS, Gate, Modulator, Net, Place, Resource, Transition
from .compiled import CompiledNet, compile_net
from .pnml import from_pnml, to_pnml

__all__ = ["Net", "Place", "Resource", "Transition", "Gate", "Modulator", "DISCIPLINES", "GATE_KINDS"]
__all__ += ["to_pnml", "from_pnml", "CompiledNet", "compile_net"]
