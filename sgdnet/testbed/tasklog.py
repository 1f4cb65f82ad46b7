"""A real training task beside the testbed's timing model: per-update loss logging.

The testbed's PS schemes move the gradients of a torch MLP (:mod:`.models`), whose sizes set
the timing; its synthetic batch is fixed, so its loss says nothing. With a job's ``task`` set,
every worker also trains a task of :mod:`sgdnet.accuracy.tasks` (numpy; e.g. ``"logreg"``)
through the same PS, in the same steps: at the push of its first layer it computes the task's
mean gradient over its next batch of ``b`` samples -- worker ``w`` (rank ``w + 1``) draws its
``c``-th batch as the ``c``-th ``integers(0, n_train, b)`` of
:func:`~sgdnet.accuracy.tasks.batch_stream` ``(seed, w)``, exactly as
:func:`sgdnet.accuracy.replay.replay` does -- on the task parameters it last pulled, and sends it
with their version (float64, ``dim + 1`` values: a few hundred bytes beside ~1 MB of layers).
The PS applies it as it applies the layers: ``sync-ps`` averages one gradient of every worker
per round (``params -= lr * mean``), ``async-ps`` / ``ssp`` apply each on arrival; the new
parameters and version go back to the worker(s), loaded before the next forward.

Rank 0 records, per update, the ``perf_counter`` time (CLOCK_MONOTONIC, common to all processes
of the machine), the worker(s) and the versions their gradients were computed on, and after the
run (off the timed path) the held-out loss and accuracy of the parameters of every update.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

__all__ = ["TaskClient", "TaskServer", "TAG_TASK", "TAG_TASK_PULL", "TAG_GO"]

#: Tags of the task's gradient push, its parameter pull, and SSP's "go" message.
TAG_TASK = 3000
TAG_TASK_PULL = 3001
TAG_GO = 3002


class TaskClient:
    """Worker side: the task parameters this worker holds, its batch stream, push and pull.

    Parameters
    ----------
    task : str
        A built-in task of :mod:`sgdnet.accuracy.tasks`.
    rank, ps : int
        This worker's rank (worker index ``rank - 1``) and the PS's rank.
    batch : int
        Samples per gradient.
    seed : int
        Seed of the batch streams.
    """

    def __init__(self, task: str, rank: int, ps: int, batch: int, seed: int):
        from ..accuracy.tasks import batch_stream, get_task

        self.tk = get_task(task)
        self.ps = ps
        self.batch = int(batch)
        self.rng = batch_stream(seed, rank - 1)
        self.params = np.asarray(self.tk.init(), dtype=float)
        self.version = 0
        self.pending: Any = None
        self.send: Any = None

    def push(self) -> None:
        """Compute the gradient on the held parameters, send it, post the pull."""
        import torch
        import torch.distributed as dist

        idx = self.rng.integers(0, self.tk.n_train, self.batch)
        g = self.tk.gradient(self.params, idx)
        msg = torch.from_numpy(np.concatenate([g, [float(self.version)]]))
        if self.send is not None:
            self.send[0].wait()
        self.send = (dist.isend(msg, self.ps, tag=TAG_TASK), msg)
        buf = torch.empty(self.params.size + 1, dtype=torch.float64)
        self.pending = (dist.irecv(buf, self.ps, tag=TAG_TASK_PULL), buf)

    def pull(self) -> None:
        """Wait for the pulled parameters (if a pull is pending) and hold them."""
        if self.pending is None:
            return
        self.pending[0].wait()
        v = self.pending[1].numpy()
        self.params = v[:-1].copy()
        self.version = int(round(v[-1]))
        self.pending = None
        if self.send is not None:
            self.send[0].wait()
            self.send = None


class TaskServer:
    """PS side: the task parameters, their version, and the per-update log."""

    def __init__(self, task: str, lr: float):
        from ..accuracy.tasks import get_task

        self.task = task
        self.tk = get_task(task)
        self.lr = float(lr)
        self.params = np.asarray(self.tk.init(), dtype=float)
        self.version = 0
        self.posted: dict[int, Any] = {}
        self.sends: dict[int, list] = {}
        self.rows: list[tuple[float, list[int], list[int], np.ndarray]] = []
        self._lock = threading.Lock()

    def _recv(self, w: int) -> np.ndarray:
        import torch
        import torch.distributed as dist

        if w not in self.posted:
            buf = torch.empty(self.params.size + 1, dtype=torch.float64)
            self.posted[w] = (dist.irecv(buf, w, tag=TAG_TASK), buf)
        work, buf = self.posted.pop(w)
        work.wait()
        return buf.numpy().copy()

    def _send(self, w: int, msg: Any) -> None:
        import torch.distributed as dist

        for s in self.sends.pop(w, []):
            s[0].wait()
        self.sends[w] = [(dist.isend(msg, w, tag=TAG_TASK_PULL), msg)]

    def sync_round(self, workers: list[int]) -> None:
        """One synchronous update: one gradient of every worker, averaged."""
        import torch

        msgs = [self._recv(w) for w in workers]
        g = np.mean([m[:-1] for m in msgs], axis=0)
        self.params = self.tk.apply(self.params, g, self.lr)
        self.version += 1
        self.rows.append((time.perf_counter(), [w - 1 for w in workers],
                          [int(round(m[-1])) for m in msgs], self.params))
        out = torch.from_numpy(np.concatenate([self.params, [float(self.version)]]))
        for w in workers:
            self._send(w, out)

    def async_update(self, w: int, lock: Any) -> None:
        """Worker ``w``'s next gradient, applied on arrival; the result returned to ``w``."""
        import torch

        m = self._recv(w)
        with lock:
            self.params = self.tk.apply(self.params, m[:-1], self.lr)
            self.version += 1
            self.rows.append((time.perf_counter(), [w - 1], [int(round(m[-1]))], self.params))
            out = torch.from_numpy(np.concatenate([self.params, [float(self.version)]]))
        self._send(w, out)

    def log(self) -> dict[str, Any]:
        """Wait for the last sends; the per-update log with held-out loss and accuracy."""
        for ss in self.sends.values():
            for s in ss:
                s[0].wait()
        ev = [_evaluate(self.tk, p) for *_, p in self.rows]
        return {"task": self.task, "lr": self.lr,
                "time": [r[0] for r in self.rows], "workers": [r[1] for r in self.rows],
                "reads": [r[2] for r in self.rows], "loss": [e[0] for e in ev],
                "accuracy": [e[1] for e in ev], "loss0": _evaluate(self.tk, self.tk.init())[0]}


def _evaluate(tk: Any, p: np.ndarray) -> tuple[float, float]:
    if hasattr(tk, "evaluate"):
        lo, ac = tk.evaluate(p)
        return float(lo), float(ac)
    return float(tk.loss(p)), float(tk.accuracy(p))
