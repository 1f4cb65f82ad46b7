"""Lazy package namespaces (PEP 562): a package's public names imported from their modules on
first use, so that importing the package (``import sgdnet``, ``sgdnet.workload``) imports none
of them; the ``sgdnet`` command then pays only for the modules its sub-command uses."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.util import find_spec
from typing import Any

__all__ = ["attach"]


def attach(package: str, names: Mapping[str, str]
           ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of a package whose public names are imported
    on first access.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    names : mapping of str to str
        Each public name -> the module (relative to the package, dotted) that defines it;
        ``""`` for a public module of the package itself; ``"module:attr"`` when the public
        name differs from the module's attribute.

    Returns
    -------
    (callable, callable)
        ``__getattr__(name)``: imports ``name``'s module, binds the name on the package (later
        accesses are plain attribute reads) and returns it; any other submodule of the package
        is imported too, as an eager ``__init__`` made it available (``sgdnet.engine``); else
        :class:`AttributeError`. ``__dir__()``: the bound names and the lazy ones.
    """

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is None:
            if (not name.isidentifier() or name.startswith("__")
                    or find_spec(f"{package}.{name}") is None):
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            return import_module(f"{package}.{name}")
        mod, _, attr = where.partition(":")
        module = import_module(f"{package}.{mod or name}")
        value = getattr(module, attr or name) if mod else module
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
