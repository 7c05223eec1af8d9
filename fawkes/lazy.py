"""Lazy package exports (PEP 562): a package's ``__init__`` names what it offers and where it lives,
and a name's module is imported on first use, so importing one light submodule (``fawkes.store.db``,
``fawkes.mechanism.model``) does not import the whole package.  A command that needs no store and no
decision loop (``fawkes config check``, ``fawkes --help``) starts without SQLAlchemy or the policies."""

from __future__ import annotations

import gc
import importlib
import sys
import types
from collections.abc import Mapping


class _Package(types.ModuleType):
    """A package whose export may share its name with the submodule defining it
    (``fawkes.mechanism.decide``: the function, in the module of that name)."""

    def __setattr__(self, name: str, value: object) -> None:
        # importing a submodule binds it on its package: where an export has the submodule's name, the
        # export keeps the name (the module stays in sys.modules, where `from ... import` finds it)
        if isinstance(value, types.ModuleType) and name in self.__dict__.get("_shadowing", ()):
            return
        super().__setattr__(name, value)


def exports(package: str, where: Mapping[str, str], submodules: tuple[str, ...] = ()) -> None:
    """Give ``package`` a ``__getattr__`` and ``__dir__``: ``where`` maps each exported name to the
    submodule (relative to the package, without the dot) that defines it, or to ``submodule:name``
    where the export renames it; ``submodules`` are exported as themselves."""
    module = sys.modules[package]
    namespace = module.__dict__

    def __getattr__(name: str) -> object:
        if name in submodules:
            value: object = importlib.import_module(f"{package}.{name}")
        elif (sub := where.get(name)) is not None:
            sub, _, attr = sub.partition(":")
            value = getattr(importlib.import_module(f"{package}.{sub}"), attr or name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(where) | set(submodules))

    namespace["__getattr__"], namespace["__dir__"] = __getattr__, __dir__
    namespace["_shadowing"] = frozenset(n for n, sub in where.items() if n == sub)
    if namespace["_shadowing"]:
        module.__class__ = _Package


def import_frozen(module: str) -> types.ModuleType:
    """Import ``module`` with the cyclic garbage collector paused, then freeze what the import made (a
    command's module, the store): the collector's passes over the many objects SQLAlchemy, SQLModel and
    pydantic build at import are time a quick command spends on objects that live as long as the
    process (``gc.freeze``: later collections skip them; reference counting frees everything as
    before).  bench/bench_service_paths.py measures ``fawkes status`` with it."""
    if module in sys.modules:
        return sys.modules[module]
    was = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(module)
    finally:
        if was:
            gc.freeze()
            gc.enable()
