"""How ``claims.pnml`` (next to this script) was produced: with pm4py 2.7.23.11, not by sgdnet.

A process model is discovered by pm4py's inductive miner from a tiny event log (register, check,
optional rechecks, decide, then pay or reject); each transition then gets a pm4py
``RandomVariable`` (its timing and its weight), and ``pm4py.write_pnml`` writes the file: a
``pnmlcoremodel`` net in a document without namespace, with ``StochasticPetriNet`` blocks.
Run it from this directory to regenerate (``pip install pm4py``)::

    python make_claims_pnml.py
"""

from __future__ import annotations

import sys

#: (distribution type, parameters, weight) per activity; EXPONENTIAL's parameter is a rate
TIMING = {
    "register": ("DETERMINISTIC", "1.0", 1.0),
    "check": ("DETERMINISTIC", "2.0", 1.0),
    "recheck": ("DETERMINISTIC", "1.0", 1.0),
    "decide": ("DETERMINISTIC", "0.5", 3.0),
    "pay": ("DETERMINISTIC", "1.0", 3.0),
    "reject": ("IMMEDIATE", "", 1.0),
}


def main(path: str = "claims.pnml") -> None:
    import pandas as pd
    import pm4py
    from pm4py.objects.random_variables.random_variable import RandomVariable
    from pm4py.util import constants

    traces = [["register", "check", "decide", "pay"], ["register", "check", "decide", "reject"],
              ["register", "check", "recheck", "check", "decide", "pay"]]
    rows = [{"case:concept:name": f"c{c}", "concept:name": a,
             "time:timestamp": pd.Timestamp("2024-01-01") + pd.Timedelta(minutes=10 * c + i)}
            for c, tr in enumerate(traces * 3) for i, a in enumerate(tr)]
    net, im, fm = pm4py.discover_petri_net_inductive(pd.DataFrame(rows))
    for t in net.transitions:
        kind, par, weight = TIMING[t.label]
        rv = RandomVariable()
        rv.read_from_string(kind, par)
        rv.set_weight(weight)
        t.properties[constants.STOCHASTIC_DISTRIBUTION] = rv
    pm4py.write_pnml(net, im, fm, path)


if __name__ == "__main__":
    main(*sys.argv[1:])
