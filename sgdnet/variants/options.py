"""Variant options: the :class:`Option` declaration, value checks, and the options several
variants share (``max_layers``, ``discipline``, the parameter-server options, the collective
options of the variants that all-reduce).

An option check is ``check(value) -> normalised value`` raising ``ValueError`` with a short
reason; :meth:`VariantSpec.resolve <sgdnet.variants.registry.VariantSpec.resolve>` wraps it in a
:class:`~sgdnet.VariantError` naming the variant, option, value and the option's doc.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import units
from .._check import bool_problem, int_problem
from ..errors import VariantError
from ..limits import limit_problem
from .compression import check_compression
from .rings import LOOP_ROUNDS, RING_FORMS

__all__ = ["Option", "check_choice", "check_bool", "check_int", "check_bytes",
           "check_per_worker_int", "per_worker", "largest", "MAX_LAYERS", "DISCIPLINE", "BALANCE",
           "ACCUMULATE", "OPTIMIZER",
           "COMM_GRANULARITY", "COMPRESSION", "PS_OPTIONS", "SYNC_PS_OPTIONS", "OPTION_HINTS",
           "ALLREDUCE_ALGORITHM", "CHUNKS", "CHANNELS", "RING_FORM", "COLLECTIVE_OPTIONS"]


@dataclass(frozen=True)
class Option:
    """One option of a variant.

    Parameters
    ----------
    name : str
        Keyword name.
    default : object
        Value used when the option is not given.
    doc : str
        One line: what it means and which values are valid (quoted in error messages).
    check : callable, optional
        ``check(value) -> normalised value``; raises ``ValueError`` (or any
        :class:`~sgdnet.SgdnetError`) with a short reason when the value is bad. ``None`` accepts
        anything.
    """

    name: str
    default: Any
    doc: str
    check: Callable[[Any], Any] | None = None


def check_choice(*values: Any):
    """Option check accepting exactly ``values``."""

    def check(v):
        if v not in values:
            raise ValueError(f"must be one of {list(values)}")
        return v

    return check


def check_bool(v: Any) -> bool:
    """Option check: a bool."""
    why = bool_problem(v)
    if why is not None:
        raise ValueError(why)
    return bool(v)


def check_int(lo: int = 0, allow_none: bool = False, limit_name: str | None = None):
    """Option check: an integer ``>= lo`` (or ``None`` if allowed), and at most the limit
    ``limit_name`` of :mod:`sgdnet.limits` when one is named."""

    def check(v):
        why = int_problem(v, lo, allow_none)
        if why is not None:
            raise ValueError(why)
        if v is not None and limit_name is not None:
            over = limit_problem(v, limit_name)
            if over is not None:
                raise ValueError(f"it {over}")
        return None if v is None else int(v)

    return check


def check_bytes(allow_none: bool = False, positive: bool = False, allow_inf: bool = False):
    """Option check: a byte size (``"25MB"`` or a number), optionally ``None`` / ``inf``."""

    def check(v):
        if v is None and allow_none:
            return None
        if allow_inf and isinstance(v, (float, int)) and not isinstance(v, bool) and v == math.inf:
            return math.inf
        b = units.nbytes(v, what="size")
        if positive and not b > 0:
            raise ValueError("must be > 0 bytes")
        return b

    return check


def check_per_worker_int(lo: int = 1):
    """Option check: an integer ``>= lo``, or one per worker (a list, a tuple or a string such as
    ``"2,4,4,8"`` from the command line), normalised to an ``int`` or a ``tuple`` of ints. The
    length is checked against the cluster by the builder (:func:`per_worker`)."""

    def check(v):
        if isinstance(v, str):
            txt = v.strip().strip("[]()")
            try:
                v = [int(x) for x in txt.replace(",", " ").split()]
            except ValueError:
                raise ValueError(f"{v!r} is not an integer or a comma-separated list of "
                                 "integers (one per worker)") from None
            if len(v) == 1:
                v = v[0]
        if isinstance(v, (list, tuple)):
            if not v:
                raise ValueError("an empty list; give an integer or one per worker")
            for x in v:
                why = int_problem(x, lo)
                if why is not None:
                    raise ValueError(f"element {x!r} {why}")
            return tuple(int(x) for x in v)
        why = int_problem(v, lo)
        if why is not None:
            raise ValueError(why + " (or a list of them, one per worker)")
        return int(v)

    return check


def per_worker(name: str, value: int | Sequence[int], workers: int, variant: str) -> list[int]:
    """``value`` (an int, or one per worker) as a list of ``workers`` ints.

    Raises
    ------
    VariantError
        A list whose length is not ``workers``.
    """
    if isinstance(value, (list, tuple)):
        if len(value) != workers:
            raise VariantError(
                f"variant {variant!r}: option {name}={list(value)!r} has {len(value)} entries "
                f"but the cluster has {workers} workers; give one integer per worker or a "
                "single integer for all")
        return [int(x) for x in value]
    return [int(value)] * workers


def largest(value: int | Sequence[int]) -> int:
    """The largest of an int-or-per-worker option value (e.g. for a warm-up length)."""
    return max(value) if isinstance(value, (list, tuple)) else int(value)


MAX_LAYERS = Option(
    "max_layers", None,
    "None (every layer) or an int >= 1: merge consecutive layers into at most that many groups",
    check_int(1, allow_none=True),
)
DISCIPLINE = Option(
    "discipline", "flows",
    "the network model: 'flows' (max-min fair flows over uplink -> downlink, one connection per "
    "host pair, per-byte CPU costs from the cluster), 'fifo' (first come, first served per NIC) "
    "or 'ps' (each NIC processor-shared by its transfers)",
    check_choice("flows", "fifo", "ps"),
)

BALANCE = Option(
    "balance", "none",
    "'none' (every worker uses the profile's batch) or 'batch' (proportional sampling: worker "
    "i's batch is B*n*speed_i/sum(speeds), rounded keeping the global batch n*B, so every worker "
    "computes for about T_c*n/sum(speeds); throughput is counted in samples)",
    check_choice("none", "batch"),
)
ACCUMULATE = Option(
    "accumulate", 1,
    "an integer k >= 1: gradient accumulation over k micro-batches of the profile's batch before "
    "communicating (DDP no_sync, Horovod backward_passes_per_step, DeepSpeed "
    "gradient_accumulation_steps): a step is k forward/backward passes and one exchange, k*B "
    "samples (every variant; ModelProfile.with_accumulation)",
    check_int(1, limit_name="max_count"),
)
OPTIMIZER = Option(
    "optimizer", None,
    "None (the profile's optimizer step as it is) or 'sgd', 'momentum', 'adam', 'adamw', "
    "'lamb': the optimizer step re-timed from the bytes it reads and writes per parameter on "
    "the memory bandwidth of the profile's device (sgdnet.workload.optimizer.with_optimizer), "
    "and the optimizer states of the memory per GPU (every variant); a profile whose device is "
    "not a built-in one keeps its update times, only its memory follows the option",
    check_choice(None, "sgd", "momentum", "adam", "adamw", "lamb"),
)
COMM_GRANULARITY = Option(
    "comm_granularity", "layer",
    "what one gradient message is in fine nets (ModelProfile.messages): 'layer' (one per layer, "
    "the default), 'tensor' (one per parameter tensor, as a loop over p.grad or one PS key per "
    "tensor) or 'bucket' (tensors fused into buckets of bucket_bytes, PyTorch DDP's rule); "
    "profiles without tensor lists communicate per layer",
    check_choice("layer", "tensor", "bucket"),
)
COMPRESSION = Option(
    "compression", None,
    "None, 'topk:R' (keep a fraction R of the gradient's elements, values + int32 indices, "
    "exchanged with an all-gather), 'powersgd:R' (rank-R PowerSGD: all-reduces of P then Q, "
    "square-matrix approximation of each tensor's shape), 'onebit' (sign + scale with error "
    "feedback: an all-reduce of 1/32 of the bytes); append ';s_per_byte=X' to set the "
    "compress and decompress cost per gradient byte (default: memory passes at the profile "
    "device's bandwidth)",
    check_compression,
)
# the collective options of every variant that all-reduces (allreduce, local-sgd, cocod, pipe-sgd)
ALLREDUCE_ALGORITHM = Option(
    "algorithm", "ring",
    "'ring' (reduce-scatter + all-gather), 'tree' (binary tree reduce + broadcast) or "
    "'hierarchical' (intra-node reduce-scatter, inter-node ring all-reduce of 1/g per local "
    "rank, intra-node all-gather; needs a Cluster topology); 'dbtree': NCCL's double binary "
    "tree (two trees, half the data each; on a topology NCCL's multi-node tree: the double "
    "tree over the nodes, a chain of GPUs inside each, streamed)",
    check_choice("ring", "tree", "dbtree", "hierarchical"),
)
CHUNKS = Option(
    "chunks", 1,
    "an integer >= 1: pieces a hierarchical all-reduce is pipelined in through its three "
    "phases, as NCCL does (1: none; 'hierarchical' only)",
    check_int(1, limit_name="max_count"),
)
CHANNELS = Option(
    "channels", 1,
    "an integer >= 1: concurrent rings (or double trees) of a 'ring' (or 'dbtree') all-reduce, "
    "fine, or coarse on multi-GPU nodes, as NCCL's channels; on a topology ring k crosses "
    "nodes through NIC k mod nics (and tree k's chains start at that NIC), so "
    "channels = nics_per_node uses every NIC (1: one ring)",
    check_int(1, limit_name="max_count"),
)
RING_FORM = Option(
    "ring_form", "auto",
    "'auto', 'unrolled', 'looped' or 'pipelined': how rings are built: one transfer per member "
    "and round (the net stays an event graph, 2n(n-1) transfers), a looped sub-net with a round "
    "counter (O(n) transitions, same timing, O(n^2) events), or one streamed flow per ring edge "
    "as NCCL pipelines a ring (O(n) transitions and events; the closed form on equal edges); "
    f"'auto' pipelines rings of more than {LOOP_ROUNDS} rounds and every ring of a coarse net; "
    "'dbtree': 'pipelined' streams each tree edge, other forms store and forward at every hop, "
    "'auto' streams on a topology with several GPUs per node",
    check_choice(*RING_FORMS),
)
#: The collective options, in the order the all-reduce variants list them.
COLLECTIVE_OPTIONS = (ALLREDUCE_ALGORITHM, CHUNKS, CHANNELS, RING_FORM)

#: Hints for options a variant does not have, appended to the "no option" error.
OPTION_HINTS: dict[str, str] = {
    "balance": "balance='batch' evens out the wait at a synchronisation barrier; asynchronous "
               "variants (async-ps, ssp, dssp) have none: every worker already runs at its own "
               "pace, so a bigger batch on a fast worker only changes what a step is",
    "compression": "gradient compression is modelled on the all-reduce variants (allreduce, "
                   "pipe-sgd, local-sgd, cocod): a parameter server aggregating sparse or "
                   "low-rank pushes is another protocol, not modelled",
    "k": "per-worker local steps are options of local-sgd (H) and cocod (k)",
}


PS_OPTIONS: tuple[Option, ...] = (
    Option("shards", None, "None (cluster.ps_shards) or an int >= 1: number of PS shards",
           check_int(1, allow_none=True, limit_name="max_count")),
    Option("placement", None,
           "None (cluster.ps_placement), 'dedicated' (own hosts and NICs) or 'colocated' "
           "(shard k shares worker k's host and NIC)",
           check_choice(None, "dedicated", "colocated")),
    DISCIPLINE,
    Option("priority", False,
           "True/False: P3/ByteScheduler priority scheduling of pushes and pulls by layer (layer 0 "
           "first) on the NICs; needs discipline='fifo'", check_bool),
    Option("partition_bytes", None,
           "None or a size > 0 (e.g. '4MB'): split tensor pieces larger than this into equal "
           "chunks of at most this size, each sent and applied separately",
           check_bytes(allow_none=True, positive=True)),
    Option("merge_small_layers", False,
           "True/False: fine nets with 2 or more shards merge each layer under shard_min_bytes "
           "into the next, so every group is split over all shards (sync-ps then carries each "
           "as one flow group; what the memory budget falls back to first)", check_bool),
    Option("shard_policy", "round_robin",
           "'round_robin' (small tensor l on shard l % k) or 'least_loaded' (greedy by bytes)",
           check_choice("round_robin", "least_loaded")),
    COMM_GRANULARITY,
    Option("bucket_bytes", 25e6, "a size (e.g. '25MB'): bucket capacity of "
           "comm_granularity='bucket' (PS keys fused as DDP fuses tensors); unused otherwise",
           check_bytes(positive=True)),
    MAX_LAYERS,
    # per-node aggregation (issue #36): sgdnet.variants.ps_aggregate
    Option("aggregation", "none",
           "'none' (every GPU pushes and pulls its own copy) or 'node' (needs a Cluster "
           "topology: the node's GPUs reduce each piece inside the node, the node pushes one "
           "sum per piece and pulls it once, then broadcasts it inside the node, as TensorFlow's "
           "distributed_replicated, MXNet's dist_device_sync and BytePS do)",
           check_choice("none", "node")),
    Option("local_reduce", "device",
           "with aggregation='node': 'device' (each piece reduced onto one GPU, the pieces "
           "round-robin over the node's GPUs: TensorFlow's distributed_replicated, MXNet's "
           "device kvstore), 'root' (every piece onto the node's first GPU, next to its NIC: "
           "BytePS on NVLink machines) or 'scatter' (a reduce-scatter ring inside the node, "
           "each GPU pushes its 1/g of every piece: BytePS on PCIe machines)",
           check_choice("device", "root", "scatter")),
)
#: Options of the synchronous PS variant: the PS options and ``balance``.
SYNC_PS_OPTIONS: tuple[Option, ...] = (*PS_OPTIONS, BALANCE)
