"""The house's layers point down: no module of ``src/tokpack`` imports a higher layer (module-
level or inside a function, relative imports resolved), no modules import each other in a circle
at import time, and the public API still imports from the top-level package."""

from __future__ import annotations

import ast
import functools
import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO

SRC = REPO / "src"

#: The layers of the architecture, lowest first: a module may import its own layer or a lower one.
LAYERS: dict[str, int] = {
    # 1: errors and the small base modules (the cache folder and progress reporting included)
    "errors": 1, "_schema": 1, "_atomic": 1, "_files": 1, "_compressed": 1, "_extras": 1, "_checks": 1, "_cache": 1, "_progress": 1, "_words": 1,
    "_kernels": 1, "_memory": 1, "_pool": 1, "_lazy": 1, "_signals": 1,
    # 2: vocabularies, their patterns, trainers' names and the encoder
    "vocab": 2,
    # 3: reading a corpus (sources, documents, manifests, the bundled sample)
    "corpus": 3,
    # 4: the exact BPE rules and trainer; the pack store, every token source and every foreign format
    "bpe": 4, "store": 4,
    # 5: serving (layouts, schedules, batches); the torch bridge
    "serve": 5, "torch": 5,
    # 6: per-shard engines; preparing a corpus (prepare(), its cache and options)
    "engines": 6, "preparing": 6,
    # 7: chess, grading tokenizers
    "chess": 7, "grading": 7,
    # 8: reports, then the command line
    "report": 8, "cli": 8,
}

#: Imports between different packages of one layer that are allowed (importer, imported): the
#: base modules build on ``errors`` and on each other; ``tokpack.torch`` is the short name of
#: ``serve.torch``; a shard task encodes with the pack writer of ``preparing``; the CLI renders
#: reports. Any other same-layer pair is a layer of its own in disguise: give it one.
SAME_LAYER: set[tuple[str, str]] = {
    ("_atomic", "errors"), ("_atomic", "_signals"), ("_pool", "_atomic"), ("_checks", "errors"), ("_extras", "errors"), ("_files", "errors"),
    ("_schema", "errors"), ("_schema", "_files"), ("_schema", "_atomic"), ("_schema", "_words"), ("_cache", "errors"),
    ("_cache", "_files"),
    ("_compressed", "errors"), ("_files", "_compressed"), ("_files", "_atomic"), ("_pool", "errors"),
    ("torch", "serve"),
    ("engines", "preparing"),
    ("cli", "report"),
}

#: Upward imports allowed for a while (an entry goes when its import does:
#: ``test_pending_exceptions_still_needed`` says so). None today.
PENDING: set[tuple[str, str]] = set()

#: Registries that name a higher layer's module by string, to import it only when a record of that
#: kind is met: a job of chess games (whose task and encoder live in ``chess/``) runs on the same
#: engines as a text job; the one vocabulary loader reads the vocabulary a pack, dataset or export
#: carries through the pack store when it finds such a record. Nothing else of the higher layer is
#: imported; a new kind adds one entry.
REGISTRIES: set[tuple[str, str]] = {
    ("tokpack.engines.kinds", "tokpack.chess.jobs.shards"),
    ("tokpack.vocab.loading", "tokpack.store.vocabulary"),
}


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of ``src/tokpack`` by dotted name: its file and whether it is a package."""
    found = {}
    for path in sorted((SRC / "tokpack").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


MODULES = modules()


def _targets(node: ast.Import | ast.ImportFrom, importer: str) -> Iterator[str]:
    """The tokpack modules ``node`` imports (``from pkg import sub`` imports the submodule)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name.split(".")[0] == "tokpack")
        return
    if node.level:
        path, is_package = MODULES[importer]
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        base = package[: len(package) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    if module.split(".")[0] != "tokpack":
        return
    for alias in node.names:
        submodule = f"{module}.{alias.name}"
        yield submodule if submodule in MODULES else module


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_at_import(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported (not in functions, classes'
    methods or ``if TYPE_CHECKING:``)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _run_at_import(node.body)
            yield from _run_at_import(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(handler.body for handler in node.handlers), node.orelse, node.finalbody):
                yield from _run_at_import(block)
        elif isinstance(node, (ast.With, ast.AsyncWith, ast.ClassDef)):
            yield from _run_at_import(node.body)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            yield from _run_at_import(node.body)
            yield from _run_at_import(node.orelse)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                yield from _run_at_import(case.body)


def _named_modules(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """Modules named by a string (``importlib.import_module("tokpack.x")``, a registry's entry):
    an import all the same, made later."""
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            module = node.value.split(":", 1)[0]  # "module:function" names a function to import
            if module.startswith("tokpack.") and module in MODULES:
                yield module, node.lineno


def _run_ever(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run at some point: at import time or inside a function (not
    those under ``if TYPE_CHECKING:``, which never run)."""
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node.test)
                   for statement in node.body for inner in ast.walk(statement)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in typing_only:
            yield node


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once for every scan (the tests only read it)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def imports(*, at_import_only: bool) -> dict[str, set[tuple[str, int]]]:
    """``module -> {(imported module, line)}``: every import anywhere in the module, or only those
    run when it is imported (made once; callers only read it)."""
    graph: dict[str, set[tuple[str, int]]] = {}
    for name, (path, _) in MODULES.items():
        tree = _tree(path)
        nodes = _run_at_import(tree.body) if at_import_only else (
            node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))
        graph[name] = {(target, node.lineno) for node in nodes for target in _targets(node, name)}
        if not at_import_only:
            graph[name] |= set(_named_modules(tree))
    return graph


def statement_imports() -> dict[str, set[str]]:
    """``module -> {imported module}``: every import statement that ever runs, at import time or
    inside a function (a registry's string is not one: :data:`REGISTRIES` lists those)."""
    graph: dict[str, set[str]] = {}
    for name, (path, _) in MODULES.items():
        tree = _tree(path)
        graph[name] = {target for node in _run_ever(tree) for target in _targets(node, name) if target != name}
    return graph


def layer_of(module: str) -> tuple[str, int]:
    """The top-level name under ``tokpack`` and its layer (the top-level package itself is above all)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "tokpack", 99
    return parts[1], LAYERS[parts[1]]


def test_every_module_has_a_layer() -> None:
    unplaced = sorted({name.split(".")[1] for name in MODULES if "." in name} - set(LAYERS))
    assert not unplaced, f"give these a layer in LAYERS (and in DESIGN.md): {unplaced}"


def upward_imports() -> list[str]:
    found = []
    for importer, targets in imports(at_import_only=False).items():
        if importer == "tokpack":  # the top-level package re-exports the public API of every layer
            continue
        top, level = layer_of(importer)
        for target, line in sorted(targets):
            target_top, target_level = layer_of(target)
            if (importer, target) in PENDING | REGISTRIES or target_top == top:
                continue
            if target_level > level or (target_level == level and (top, target_top) not in SAME_LAYER):
                found.append(f"{importer}:{line} (layer {level}) imports {target} (layer {target_level})")
    return found


def test_no_module_imports_a_higher_layer() -> None:
    """Data flows one way (corpus -> documents -> encoder -> pack -> layout -> batches): a lower
    layer that imports a higher one ties the reading of a corpus to the serving of batches."""
    assert upward_imports() == []


def test_pending_exceptions_still_needed() -> None:
    graph = imports(at_import_only=False)
    stale = [pair for pair in PENDING if pair[1] not in {target for target, _ in graph.get(pair[0], ())}]
    assert not stale, f"these imports are gone: remove them from PENDING: {stale}"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_strongly_connected_finds_a_circle() -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_at_import_time() -> None:
    """Modules that import each other when loaded work only in one order; none do."""
    graph = {name: {target for target, _ in targets if target != name}
             for name, targets in imports(at_import_only=True).items()}
    assert strongly_connected(graph) == []


def test_no_import_circle_through_imports_inside_functions() -> None:
    """A circle that is alive only through an import inside a function is still a circle: each
    module needs the other to do its job, and neither can be read alone. None, anywhere."""
    assert strongly_connected(statement_imports()) == []


def test_the_circle_scan_sees_imports_inside_functions_but_not_for_type_checking() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tokpack.serve\n"
                     "def f():\n    import tokpack.store.reader\n")
    assert [node.names[0].name for node in _run_ever(tree) if isinstance(node, ast.Import)] == ["tokpack.store.reader"]


def test_the_scan_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    """The layer check reads imports inside functions and resolves ``from ..x import y``."""
    tree = ast.parse("def f():\n    from ..store import format\n    import tokpack.cli\n")
    found = {target for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
             for target in _targets(node, "tokpack.vocab.loading")}
    assert found == {"tokpack.store.format", "tokpack.cli"}
    assert not list(_run_at_import(tree.body))


@pytest.mark.parametrize("name", ["prepare", "TokenizedCorpus", "PrepareProgress", "load_vocabulary", "export"])
def test_public_api_from_the_top(name: str) -> None:
    tokpack = importlib.import_module("tokpack")
    assert hasattr(tokpack, name)


def test_every_public_name_imports() -> None:
    tokpack = importlib.import_module("tokpack")
    missing = [name for name in tokpack.__all__ if not hasattr(tokpack, name)]
    assert not missing
    namespace: dict[str, object] = {}
    exec(f"from tokpack import {', '.join(tokpack.__all__)}", namespace)  # noqa: S102
    assert all(namespace[name] is getattr(tokpack, name) for name in tokpack.__all__)


def test_every_token_source_reads_a_span_itself(tmp_path: Path) -> None:
    """``read_span`` is part of the token source contract (exports read whole documents through
    it): a pack and a sharded dataset give the ids of any span, and a dataset still verifies a
    shard before it first reads from it."""
    import numpy as np

    from tokpack.errors import IntegrityError
    from tokpack.serve.memory import pack_of_documents
    from tokpack.store import DocumentCut, Source, TokenSource, open_tokens, write_dataset
    from tokpack.store.dataset import shard_name
    from tokpack.store.source import chunks

    folder = tmp_path / "dataset"
    for rank, documents in enumerate(([[1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13]])):
        pack_of_documents(documents, n_vocab=20, pad_id=0, directory=folder / shard_name(rank))
    write_dataset(folder, [shard_name(0), shard_name(1)], source=Source(name="x", sha256="0" * 64, n_bytes=0),
                  cut=DocumentCut(rule="list"))
    for source in (open_tokens(folder), open_tokens(folder / shard_name(1))):
        assert isinstance(source, TokenSource)
        for start, end in ((0, source.n_tokens), (2, 9), (5, 5), (6, 7)):
            if end <= source.n_tokens:
                expected = source.take(np.arange(start, end, dtype=np.int64))
                assert source.read_span(start, end).tolist() == expected.tolist()
        assert [ids.tolist() for ids, _ in chunks(source, (0, source.n_docs), chunk_tokens=4)] == \
            [source.take(np.arange(a, b)).tolist() for a, b in zip(source.starts, [*source.starts[1:], source.n_tokens])]

    tokens = folder / shard_name(1) / "tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-1] ^= 1  # the last id of the second shard
    tokens.write_bytes(bytes(data))
    dataset = open_tokens(folder)  # verified shard by shard, on first read
    assert dataset.read_span(0, 7).tolist() == [1, 2, 3, 4, 5, 6, 7]
    with pytest.raises(IntegrityError):
        dataset.read_span(6, 9)


def test_exports_read_through_the_contract_not_a_private_hook() -> None:
    stream = (SRC / "tokpack" / "store" / "formats" / "_writing.py").read_text(encoding="utf-8")
    assert "_reading" not in stream and "getattr(source" not in stream


def test_the_scan_sees_imports_by_name_and_inside_loops() -> None:
    # An upward import hidden in importlib or a registry string, or a circle made inside a loop at
    # module level, must not slip past the two tests above.
    tree = ast.parse('"""tokpack.serve.loader is named in a docstring, which imports nothing."""\n'
                     'import importlib\n'
                     'def f():\n    return importlib.import_module("tokpack.serve.loader")\n'
                     'TASKS = {"x": "tokpack.chess.jobs.shards:run_chess_shard"}\n')
    assert sorted(_named_modules(tree)) == [("tokpack.chess.jobs.shards", 5), ("tokpack.serve.loader", 4)]
    looped = ast.parse("for _ in range(1):\n    import tokpack.store.reader\nwhile False:\n    import tokpack.serve\n")
    assert [node.names[0].name for node in _run_at_import(looped.body)] == ["tokpack.store.reader", "tokpack.serve"]


def test_the_packages_are_attributes_of_tokpack_after_a_plain_import() -> None:
    # `import tokpack; tokpack.serve.Windows(...)`, as the guides write it, in a fresh interpreter
    # (the lazy package loads them on first use).
    code = ("import tokpack; names = [tokpack.serve.Windows, tokpack.store.Pack, tokpack.vocab.BpeTokenizer, "
            "tokpack.corpus.CorpusManifest, tokpack.preparing.prepare, tokpack.errors.InputError, tokpack.bpe, "
            "tokpack.engines, tokpack.export]; "
            "assert callable(tokpack.export); print(len(names))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0 and done.stdout.strip() == "9", done.stderr
