"""The formalism: Net builder and validation (``builder``), compiled arrays (``compiled``),
networkx view (``graph``) and PNML interchange (``pnml``).

Each public name is imported from its module on first use (PEP 562,
:mod:`sgdnet._lazy`).
"""

from __future__ import annotations

from .._lazy import attach as _attach

#: the module of each public name
_LAZY: dict[str, str] = {
    "DISCIPLINES": "builder",
    "GATE_KINDS": "builder",
    "Gate": "builder",
    "Modulator": "builder",
    "Net": "builder",
    "Place": "builder",
    "Resource": "builder",
    "Transition": "builder",
    "CompiledNet": "compiled",
    "compile_net": "compiled",
    "from_pnml": "pnml",
    "to_pnml": "pnml",
}

__getattr__, __dir__ = _attach(__name__, _LAZY)

__all__ = ["Net", "Place", "Resource", "Transition", "Gate", "Modulator", "DISCIPLINES", "GATE_KINDS"]
__all__ += ["to_pnml", "from_pnml", "CompiledNet", "compile_net"]
