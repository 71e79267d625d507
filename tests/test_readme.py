"""The README is a front page: short, the quick start's two commands, every guide linked.

Its Python runs, its command lines and links are checked with every guide's, in test_docs.py.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def test_the_readme_is_a_front_page_that_links_every_guide() -> None:
    readme = README.read_text(encoding="utf-8")
    assert len(readme.split("\n")) <= 250
    # The quick start's two commands, exactly: the main job on bundled data, and the tests.
    quick = readme.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```\n(\./dev demo.*?)```", quick, flags=re.S | re.M)
    assert [line.split()[:2] for line in block.strip().split("\n")] == [["./dev", "demo"], ["./dev", "test"]]
    for guide in sorted((REPO / "docs").glob("*.md")):
        assert f"](docs/{guide.name})" in readme, f"the README's guide table misses {guide.name}"


def test_the_layout_names_every_package_of_the_tree() -> None:
    """The README's Layout is the source of truth for what is built: every package is in it."""
    readme = README.read_text(encoding="utf-8")
    layout = readme.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    packages = {p.parent.name for p in (REPO / "src" / "tokpack").glob("*/__init__.py") if p.parent.name != "sample"}
    named = {name for name in packages if f"`src/tokpack/{name}/`" in layout}
    assert named == packages, f"missing from the Layout: {sorted(packages - named)}"
    for folder in ("examples", "data", "docs", "bench"):
        assert f"| `{folder}/` |" in layout and (REPO / folder).is_dir()


def test_the_layout_lists_the_packages_from_the_bottom_up() -> None:
    """The Layout says "from the bottom up": its packages come in the order of the layer test's layers."""
    from test_layers import LAYERS

    readme = README.read_text(encoding="utf-8")
    layout = readme.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `src/tokpack/([a-z_]+)/` \|", layout, flags=re.M)
    layers = [LAYERS[name] for name in listed]
    assert layers == sorted(layers), list(zip(listed, layers))
