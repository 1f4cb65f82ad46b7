"""Size limits checked before anything is allocated.

A typo such as ``workers=10**12`` or ``replications=10**12`` would otherwise grow memory until the
machine swaps; every entry point refuses sizes beyond :data:`LIMITS` with an
:class:`~sgdnet.SgdnetError` naming the value, the limit and how to raise it. The limits are far
above anything the engine can simulate in reasonable time; raise one for a deliberate huge run
with ``sgdnet.limits.LIMITS["workers"] = 10**6`` or the environment variable of the same name in
capitals (``SGDNET_MAX_WORKERS=1000000``).
"""

from __future__ import annotations

import os
from typing import Any

from .errors import SgdnetError, SimulationError

__all__ = ["LIMITS", "limit", "limit_problem", "check_limit"]

#: The default limits (see the module docstring to raise one).
LIMITS: dict[str, int] = {
    # workers of a cluster (a net has several transitions per worker)
    "max_workers": 65_536,
    # independent replications of one simulate() call
    "max_replications": 100_000,
    # warmup + steps of one replication (the kernel counts in int64)
    "max_steps": 2**53,
    # an initial token count or an arc weight: markings are int64 in the kernel, and 10**9
    # completions (the largest default event budget) adding 2**31 each stay below 2**63
    "max_tokens": 2**31 - 1,
    # bytes of the per-replication output arrays (step times, traces) of one simulate() call;
    # numpy's zeros are committed lazily, page by page as steps complete, so this bounds what a
    # run that finishes would hold
    "max_output_bytes": 64 * 2**30,
    # estimated resident bytes of a fine net (built and compiled); a bigger one is built with
    # its layers merged into fewer groups, and says so (sgdnet.variants.budget)
    "max_net_bytes": 2 * 2**30,
    # pixels of the longer side of a net drawing (sgdnet draw)
    "max_drawing_px": 8_000,
    # bytes of a file parsed whole (profile JSON, Chrome trace, PNML, study config)
    "max_file_bytes": 64 * 2**20,
    # nesting depth of a parsed document (JSON, XML, YAML)
    "max_depth": 200,
    # nodes of a study config once its YAML aliases are expanded
    "max_config_nodes": 100_000,
    # a staleness bound (SSP's staleness, DSSP's s_lower and s_upper, a gate's bounds): each
    # gate keeps a histogram of leads up to twice its bound, per replication
    "max_staleness": 65_536,
    # DSSP's largest extra allowance r_max: its controller compares r_max^2 pairs of times at
    # every push of the fastest worker
    "max_rmax": 1_024,
    # a count a variant option or a cluster multiplies a net by (parameter-server shards,
    # all-reduce channels and chunks, backup lanes, Pipe-SGD steps in flight)
    "max_count": 4_096,
}


def limit(name: str) -> int:
    """The current value of limit ``name`` (``SGDNET_<NAME>`` in the environment wins).

    Raises
    ------
    SgdnetError
        The environment variable is not a positive integer.
    """
    env = f"SGDNET_{name.upper()}"
    raw = os.environ.get(env)
    if raw is None:
        return LIMITS[name]
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise SgdnetError(f"{env}={raw!r} must be a positive integer (a size limit)")
    return value


def limit_problem(value: Any, name: str) -> str | None:
    """Why ``value`` is refused by limit ``name`` (how it exceeds it and how to raise it), or
    ``None`` when it is within it."""
    lim = limit(name)
    if value <= lim:
        return None
    return (f"exceeds the limit {lim:,} ({name}); if this is deliberate, raise it with "
            f"SGDNET_{name.upper()}=N in the environment or sgdnet.limits.LIMITS[{name!r}] = N")


def check_limit(what: str, value: Any, name: str, *,
                error: type[SgdnetError] = SimulationError) -> None:
    """Refuse ``value > limit(name)`` with ``error`` naming ``what`` and how to raise the limit."""
    why = limit_problem(value, name)
    if why is not None:
        raise error(f"{what}={value!r} {why}")
