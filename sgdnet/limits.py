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

from ._text import short_repr
from .errors import SgdnetError, SimulationError

__all__ = ["LIMITS", "limit", "limit_problem", "check_limit"]

def _physical_bytes() -> int:
    """This machine's memory in bytes (16 GiB where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 16 * 2**30


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
    # bytes of the CLI's on-disk cache of compiled nets (sgdnet.netcache): the least recently
    # used files are deleted beyond it (a compact fine net of 1,024 workers is ~50 MB)
    "max_net_cache_bytes": 2**30,
    # places + transitions of a net sgdnet draw builds (a lower bound is checked before it
    # is built: a fine net has at least one transition per layer and worker); a drawing of
    # more is unreadable at max_drawing_px, and building it takes minutes
    "max_draw_elements": 200_000,
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
    # seconds of one firing (a layer's compute, a transfer's bytes over its slowest link, a
    # cluster's per-byte or per-message cost): ~32 years; beyond it a typo (1e300, '1e-300bps')
    # and the simulated clock would lose the short durations to rounding (time stops)
    "max_firing_s": 10**9,
    # completions one simulate() call is estimated to play (transitions x steps per step
    # transition x replications run): ~10-30 minutes of kernel time on one core; beyond it a
    # run is refused before it starts instead of giving no answer for hours
    "max_run_events": 10**10,
    # samples per step of a model profile (a batch of 10**30 samples is a typo, and the
    # throughput printed from it nonsense; the largest published batches are ~10**6: Goyal et
    # al. 2017 use 8,192 images, LAMB (You et al. 2020) 65,536 sequences)
    "max_batch_size": 2**24,
    # rows of a study grid (the product of its axes' lengths) or of its configs, checked before
    # any row is built or run
    "max_study_rows": 100_000,
    # a count a variant option or a cluster multiplies a net by (parameter-server shards,
    # all-reduce channels and chunks, backup lanes, Pipe-SGD steps in flight)
    "max_count": 4_096,
    # bytes of one replication's engine state sized from the net (the processor-sharing and
    # flow holder tables: shared links x the most flows one link holds, dense), checked before
    # each kernel call: three quarters of this machine's memory, so a run that would be
    # OOM-killed after minutes (65,536 workers into one parameter server: ~130 GB) is refused
    "max_state_bytes": _physical_bytes() * 3 // 4,
}


_LARGEST = 10**308  # every limit is compared with floats too: keep it finite


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
    if value < 1 or value > _LARGEST:
        raise SgdnetError(f"{env}={raw!r} must be a positive integer (a size limit) of at most "
                          f"{_LARGEST:.0e}")
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
        raise error(f"{what}={short_repr(value)} {why}")
