"""Regenerate the README's screenshots: ``./dev screenshots``.

Builds each page tokpack writes (a text pack's report, the shipped Polish tokenizer's report on
its validation split, the chess statistics' report, the BPE explorer after three merges) from
the bundled sample and ``data``, opens it from disk in Debian's Chromium (headless,
through Playwright) and saves a PNG in ``docs/screenshots/``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHOTS = REPO / "docs" / "screenshots"
DATA = REPO / "data"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def tokpack(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "tokpack.cli", *args], check=True)


def pages(work: Path) -> dict[str, tuple[Path, str | None]]:
    """name -> (page, what to click before the screenshot)."""
    from tokpack import prepare, sample_corpus
    from tokpack.grading.split import VALIDATION, plan_split, write_split

    made: dict[str, tuple[Path, str | None]] = {}
    pack = prepare(sample_corpus(), cache_dir=work / "cache", vocab_size=2048, document_bytes=1024).tokens_dir
    tokpack("report", str(pack), "-o", str(work / "pack.html"), "--block", "512")
    made["report-pack"] = (work / "pack.html", None)
    artifact = REPO / "artifacts" / "polish-8192"
    recorded = json.loads((artifact / "manifest.json").read_text(encoding="utf-8"))["split"]
    write_split(plan_split(DATA / "polish", validation=recorded["validation_fraction"], seed=recorded["seed"]), work / "split")
    tokpack("report", str(artifact / "tokenizer.json"), "--data", str(work / "split" / VALIDATION), "-o", str(work / "tok.html"))
    made["report-tokenizer"] = (work / "tok.html", None)
    config = work / "chess.toml"
    config.write_text(
        'schema = "tokpack.chess.pipeline.v1"\ngames_dir = "games"\nout_dir = "chess"\ntrain_month = "2016-01"\n'
        'val_month = "2016-02"\nbpe_vocab_size = 4096\nbpe_train_games = 20000\nstats_games = 20000\nmax_len = 200\n',
        encoding="utf-8")
    tokpack("chess", "tokenize", "--scheme", "bpe", "--stats", "--config", str(config),
            "--games", str(DATA / "chess" / "games.parquet"))
    tokpack("report", str(work / "chess" / "stats.json"), "-o", str(work / "chess.html"))
    made["report-chess"] = (work / "chess.html", None)
    tokpack("bpe", "explore", "abab", "abab", "baba", "aaaa", "--merges", "5", "-o", str(work / "explore.html"))
    made["explorer"] = (work / "explore.html", "#next")
    return made


def main() -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("Debian's chromium is needed: apt-get install chromium")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
        for name, (path, click) in pages(Path(folder)).items():
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.goto(path.as_uri())
            if click:
                for _ in range(3):
                    page.click(click)
            page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=name != "report-tokenizer")
            print(f"wrote {SHOTS / f'{name}.png'}")
        browser.close()


if __name__ == "__main__":
    main()
