"""What "trained" means: a task, a held-out loss or accuracy to reach, and the training recipe
(learning rate, batch-stream seed) every scheme is replayed with."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import VariantError
from .tasks import get_task

__all__ = ["Target", "DEFAULT_LR", "parse_target", "TARGET_KEYS"]

#: Learning rate of the built-in tasks when the target gives none: stable for every schedule
#: of staleness 0 at batch 32 on these tasks (a larger one makes sequential SGD noisier at
#: the end, a much smaller one slows every scheme alike).
DEFAULT_LR = {"logreg": 0.5, "mlp": 0.5, "digits": 0.1}


@dataclass(frozen=True)
class Target:
    """Reach ``loss`` (held-out loss at most) or ``accuracy`` (held-out accuracy at least) on
    ``task``.

    Attributes
    ----------
    task : str or Task
        A built-in task (``"logreg"``, ``"mlp"``, ``"digits"``) or a task object
        (:class:`sgdnet.accuracy.tasks.Task`).
    loss, accuracy : float, optional
        Exactly one of them.
    lr : float, optional
        Learning rate of every update (default :data:`DEFAULT_LR` of a built-in task, else 0.1).
    seed : int
        Seed of the workers' batch streams (replication ``r`` uses ``seed + r``).
    eval_every : int, optional
        Evaluate the held-out loss every this many updates (default: once per round of the
        workers' gradients: every update of a synchronous scheme, every ``n`` updates of an
        asynchronous one, every averaging round of local SGD / CoCoD); the updates to the
        target are known to this resolution, which does not depend on the simulated length.
    window : int
        The target is reached at the first evaluation where the mean of the last ``window``
        evaluations reaches it (1: the first crossing, as MLPerf's time to train; more:
        held, so that one fluctuation of a curve at its noise floor does not count).
    """

    task: Any
    loss: float | None = None
    accuracy: float | None = None
    lr: float | None = None
    seed: int = 0
    eval_every: int | None = None
    window: int = 1

    def __post_init__(self):
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise VariantError(f"Target window={self.window!r} must be an integer >= 1 "
                               "(evaluations averaged; 1: the first crossing)")
        if (self.loss is None) == (self.accuracy is None):
            raise VariantError(f"Target(loss={self.loss!r}, accuracy={self.accuracy!r}): give "
                               "exactly one of loss= or accuracy=")
        for name in ("loss", "accuracy", "lr"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v <= 0):
                raise VariantError(f"Target {name}={v!r} must be a positive finite number")
        if self.accuracy is not None and self.accuracy > 1:
            raise VariantError(f"Target accuracy={self.accuracy!r} must be a fraction in (0, 1]")
        get_task(self.task)  # unknown names and incomplete objects fail here

    @property
    def task_name(self) -> str:
        """The task's name."""
        return self.task if isinstance(self.task, str) else str(getattr(self.task, "name",
                                                                         type(self.task).__name__))

    @property
    def learning_rate(self) -> float:
        """``lr``, or the task's default."""
        if self.lr is not None:
            return float(self.lr)
        return DEFAULT_LR.get(self.task_name, 0.1) if isinstance(self.task, str) else 0.1

    def describe(self) -> str:
        """``"logreg: loss <= 0.35"``."""
        what = f"loss <= {self.loss:g}" if self.loss is not None else \
            f"accuracy >= {self.accuracy:g}"
        held = f" (mean of {self.window} evaluations)" if self.window > 1 else ""
        return f"{self.task_name}: {what}{held}"

    @classmethod
    def parse(cls, text: str, **defaults: Any) -> Target:
        """A target from its one-string spelling (:func:`parse_target`)."""
        return parse_target(text, **defaults)

    def spec(self) -> str:
        """The one-string spelling :func:`parse_target` reads back (built-in tasks):
        ``"digits:acc=0.95"``, ``"logreg:loss=0.4,lr=0.2,window=3"``."""
        parts = [f"loss={self.loss:g}" if self.loss is not None else f"acc={self.accuracy:g}"]
        if self.lr is not None:
            parts.append(f"lr={self.lr:g}")
        for key, default in (("window", 1), ("seed", 0), ("eval_every", None)):
            v = getattr(self, key)
            if v != default:
                parts.append(f"{key}={v}")
        return f"{self.task_name}:{','.join(parts)}"


#: Keys of the one-string spelling (:func:`parse_target`) and the ``Target`` field each sets.
TARGET_KEYS = {"loss": "loss", "acc": "accuracy", "accuracy": "accuracy", "lr": "lr",
               "window": "window", "seed": "seed", "eval_every": "eval_every"}
_INT_KEYS = ("window", "seed", "eval_every")
_EXAMPLE = "write e.g. digits:acc=0.95 or logreg:loss=0.4,lr=0.2"


def parse_target(text: Any, **defaults: Any) -> Target:
    """A :class:`Target` from ``TASK:KEY=VALUE[,KEY=VALUE...]``: ``"digits:acc=0.95"``,
    ``"logreg:loss=0.4,lr=0.2,window=3"`` (the CLI's ``--target``, a study's ``target`` axis).

    Keys (:data:`TARGET_KEYS`): ``loss`` or ``acc`` / ``accuracy`` (exactly one), and optional
    ``lr``, ``window``, ``seed``, ``eval_every``; ``defaults`` (``Target`` fields) fill what the
    text leaves out, the text wins. A :class:`Target` is returned as it is.

    Raises
    ------
    VariantError
        Not a string of that form, an unknown task or key, a key twice, a value that is not a
        number, or a target :class:`Target` refuses; the message names the bad part.
    """
    if isinstance(text, Target):
        return text
    if not isinstance(text, str):
        raise VariantError(f"target {text!r} is not a string; {_EXAMPLE}")
    task, sep, rest = text.strip().partition(":")
    task = task.strip()
    if not sep or not task or not rest.strip():
        raise VariantError(f"target {text!r} is not TASK:KEY=VALUE (loss= or acc=); {_EXAMPLE}")
    fields: dict[str, Any] = {}
    for item in rest.split(","):
        key, eq, val = (x.strip() for x in item.partition("="))
        if not eq or not key or not val:
            raise VariantError(f"target {text!r}: {item.strip()!r} is not KEY=VALUE; {_EXAMPLE}")
        name = TARGET_KEYS.get(key.lower())
        if name is None:
            raise VariantError(f"target {text!r}: unknown key {key!r}; use some of "
                               f"{sorted(TARGET_KEYS)}")
        if name in fields:
            raise VariantError(f"target {text!r}: {key!r} given twice (or acc= and accuracy=)")
        try:
            fields[name] = int(val) if name in _INT_KEYS else float(val)
        except ValueError:
            kind = "an integer" if name in _INT_KEYS else "a number"
            raise VariantError(f"target {text!r}: {key}={val!r} is not {kind}") from None
    if "loss" not in fields and "accuracy" not in fields:
        raise VariantError(f"target {text!r} gives neither loss= nor acc=; {_EXAMPLE}")
    kw = {k: v for k, v in defaults.items() if k not in ("loss", "accuracy")}
    kw.update(fields)
    try:
        return Target(task, **kw)
    except VariantError as e:
        raise VariantError(f"target {text!r}: {e}") from None
