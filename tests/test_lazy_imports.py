"""The packages' lazy exports (fawkes/lazy.py): a light submodule imports without the heavy ones, and
every exported name is what it was when the packages imported everything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fawkes.mechanism
import fawkes.store


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}  # this checkout's fawkes
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600,
                         env=env)
    return set(out.stdout.split())


@pytest.mark.parametrize("statement, absent", [
    ("import fawkes.mechanism.model", {"pydantic", "sqlalchemy", "fawkes.mechanism.settings",
                                       "fawkes.mechanism.policies"}),
    ("import fawkes.store.lifecycle", {"sqlalchemy", "sqlmodel", "fawkes.store.schema"}),
    ("import fawkes.config", {"sqlalchemy", "sqlmodel", "fawkes.store.api"}),
])
def test_a_light_module_imports_without_the_heavy_ones(statement, absent):
    assert not absent & _loaded_after(statement)


@pytest.mark.parametrize("package", [fawkes.mechanism, fawkes.store])
def test_every_export_resolves_to_its_modules_object(package):
    import importlib

    for name in package.__all__:
        value = getattr(package, name)
        if name in getattr(package, "_WHERE", {}):
            sub, _, attr = package._WHERE[name].partition(":")
            assert value is getattr(importlib.import_module(f"{package.__name__}.{sub}"), attr or name), name
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError):
        package.no_such_name  # noqa: B018


def test_an_export_named_like_its_module_stays_the_export():
    """``decide`` is a function in ``fawkes.mechanism.decide``: importing the module (as the controller
    does) binds it on the package, which must not hide the function."""
    import fawkes.mechanism.decide as module  # noqa: F401
    from fawkes.mechanism import decide

    assert callable(decide) and decide.__module__ == "fawkes.mechanism.decide"
    assert sys.modules["fawkes.mechanism.decide"].decide is decide
