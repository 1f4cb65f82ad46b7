"""Build model profiles from PyTorch: live measurement or a ``torch.profiler`` trace.

Needs the optional extra ``pip install 'sgdnet[torch]'`` for :func:`profile_module`;
:func:`from_chrome_trace` only reads JSON and works without torch.
"""

from __future__ import annotations

from .chrome_trace import from_chrome_trace
from .torch_hooks import profile_module

__all__ = ["profile_module", "from_chrome_trace"]
