"""Public names a package imports from their modules on first use (PEP 562), so that importing the
package loads only what its caller touches; and work that waits for a module until something else
imports it (:func:`when_imported`).

>>> namespace = {"__name__": "demo", "__all__": ["sqrt"]}
>>> getattr_, dir_ = lazy_attributes(namespace, {"sqrt": "math"})
>>> getattr_("sqrt")(9.0), "sqrt" in namespace, dir_()
(3.0, True, ['__all__', '__name__', 'sqrt'])
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_attributes(namespace: dict[str, Any], homes: Mapping[str, str],
                    packages: Sequence[str] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose ``globals()`` is ``namespace``:
    ``NAME`` of ``homes`` comes from the module ``homes[NAME]``, imported then and kept in
    ``namespace``; a name of ``packages`` is the subpackage of that name."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name in packages:
            return importlib.import_module(f"{package}.{name}")
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace["__all__"], *packages, *(name for name in namespace if name.startswith("__"))})

    return __getattr__, __dir__


def when_imported(name: str, then: Callable[[Any], object]) -> Callable[[], None]:
    """``then(module)`` for the module ``name``: at once if it is imported already, else right
    after it is first imported (by a finder first in ``sys.meta_path``, which steps aside then),
    so that whoever waits for it never imports it. Returns what stops the wait (nothing once
    ``then`` has run).

    >>> import json
    >>> seen = []
    >>> stop = when_imported("json", seen.append)
    >>> seen == [json]
    True
    """
    loaded = sys.modules.get(name)
    if loaded is not None:
        then(loaded)
        return lambda: None
    finder = _AfterImport(name, then)
    sys.meta_path.insert(0, finder)

    def stop() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)

    return stop


class _AfterImport:
    """The finder of :func:`when_imported`: it finds ``name`` as the other finders do, and has its
    loader run ``then(module)`` after the module's code. (A finder by its methods:
    ``importlib.abc``, its base class, imports ``importlib.resources`` and more.)"""

    def __init__(self, name: str, then: Callable[[Any], object]) -> None:
        self.name, self.then = name, then

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # once; the other finders find the module
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def run_then(module: Any) -> None:
                run(module)
                self.then(module)

            spec.loader.exec_module = run_then  # type: ignore[method-assign]
        return spec
