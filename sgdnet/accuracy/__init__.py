"""Time to accuracy: the update schedule of a simulated run (:mod:`.schedule`) replayed on a
real model (:mod:`.tasks`, :mod:`.replay`), or the large-batch noise-scale model
(:mod:`.noise_scale`) for synchronous schemes; :func:`time_to_accuracy` puts them together
(:mod:`.tta`). numpy only."""

from .noise_scale import (
    NoiseScaleModel,
    examples_for_batch,
    fit_steps,
    simple_noise_scale,
    steps_for_batch,
)
from .replay import Curve, replay
from .schedule import Schedule, schedule_of, schedules
from .target import Target, parse_target
from .tasks import LogisticTask, MLPTask, Task, batch_stream, get_task, task_names
from .tta import TimeToAccuracy, noise_model, time_to_accuracy

__all__ = ["Schedule", "schedule_of", "schedules", "Task", "LogisticTask", "MLPTask",
           "get_task", "task_names", "batch_stream", "Curve", "replay", "Target", "parse_target",
           "TimeToAccuracy", "time_to_accuracy", "noise_model", "NoiseScaleModel",
           "steps_for_batch", "examples_for_batch", "fit_steps", "simple_noise_scale"]
