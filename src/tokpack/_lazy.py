"""Public names a package imports from their modules on first use (PEP 562), so that importing the
package loads only what its caller touches.

>>> namespace = {"__name__": "demo", "__all__": ["sqrt"]}
>>> getattr_, dir_ = lazy_attributes(namespace, {"sqrt": "math"})
>>> getattr_("sqrt")(9.0), "sqrt" in namespace, dir_()
(3.0, True, ['__all__', '__name__', 'sqrt'])
"""

from __future__ import annotations

import importlib
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
