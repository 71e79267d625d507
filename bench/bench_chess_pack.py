"""Packing chess games: games/s, tokens/s and peak memory per scheme, against per-game loops.

    .venv/bin/python bench/bench_chess_pack.py --runs 3

The real games (``data/chess/games.parquet``, 28,499 games) are repeated into bigger
tables (``--repeat-uci`` times for uci, ...). Every measurement runs in a fresh child process
(peak RSS is its own; Hugging Face's thread pool is held to one thread, so "1 process" means
one core) and writes a real pack with its checksums. Modes, per scheme:

  pack-1        tokpack.chess.pack_games, one process (vectorized batch encoders)
  pack-2        the same with workers=2 (two encoding processes, the parent writes)
  loop          the baseline: the same reading and writing, but a plain Python loop calling
                the same encoder's encode_game game by game
  chess-loop    (san only) the bare python-chess replay: per game a Board, san_and_push per
                move, no legality check, characters mapped to the same ids

It prints one Markdown table per scheme (medians of ``--runs``; ratios to ``loop`` measured in the
same run; peak RSS is the child's high-water mark, plus its largest worker for pack-2; "CPU s per
s" is the CPU time of the child and its workers over the timed wall time, so 2.0 would mean both
cores busy throughout) and, with
``--memory``, uci pack-1's peak RSS as the input grows.

``--months`` measures packing many small months instead: the first ``--month-games`` (6,000) real
games of ``data/chess/games.pgn.zst``, re-dated round-robin over ``--n-months`` (156) months, are
converted (``tokpack chess convert``), then packed (``tokpack chess tokenize --pack``, all months,
the latest 5 % validating), interleaved, each in a fresh process; it prints the CPU and wall seconds
of both and the shards and files of the packed training folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REAL_GAMES = Path(__file__).resolve().parents[1] / "data" / "chess" / "games.parquet"
REAL_PGN = REAL_GAMES.with_name("games.pgn.zst")
COLUMNS = ["uci", "white_elo", "black_elo", "result", "n_plies"]


def child(mode: str, scheme: str, games: Path, bpe_file: str, limit: int) -> dict[str, float]:
    """One measurement: pack ``games`` (at most ``limit`` games for the loops) into a temp pack."""
    import pyarrow.parquet as pq

    from tokpack.chess.jobs.pack import pack_games
    from tokpack.chess.schemes import make_encoder
    from tokpack.chess.schemes.game_encoder import GAME_COLUMNS
    from tokpack.chess.schemes.uci_bpe import BpeEncoder
    from tokpack.store import DocumentCut, PackWriter, Source

    encoder = make_encoder(scheme, BpeEncoder.load(Path(bpe_file)) if scheme == "bpe" else None)
    def cpu_seconds() -> float:  # this process and its finished workers
        return sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for field in ("ru_utime", "ru_stime"))

    with tempfile.TemporaryDirectory() as folder:
        destination = Path(folder) / "pack"
        cpu_before = cpu_seconds()
        start = time.perf_counter()
        if mode.startswith("pack"):
            meta = pack_games(games, encoder, destination, workers=2 if mode == "pack-2" else 1)
            n_games, n_tokens = meta.n_docs, meta.n_tokens
        else:
            spell = _bare_python_chess() if mode == "chess-loop" else None
            n_games = 0
            with PackWriter(destination, vocabulary=encoder.identity) as writer:
                for batch in pq.ParquetFile(games).iter_batches(batch_size=4096, columns=list(GAME_COLUMNS)):
                    rows = list(zip(*(batch.column(c).to_pylist() for c in GAME_COLUMNS), strict=True))[: limit - n_games]
                    if spell is not None:
                        writer.add_documents([spell(uci, result) for uci, _, _, result in rows])
                    else:
                        writer.add_documents([encoder.encode_game(u, w, b, r, max_len=1 << 30) for u, w, b, r in rows])
                    n_games += len(rows)
                    if n_games >= limit:
                        break
                meta = writer.commit(source=Source(name="bench", sha256="0" * 64, n_bytes=0), cut=DocumentCut(rule="game"))
            n_tokens = meta.n_tokens
        seconds = time.perf_counter() - start
        cpu = cpu_seconds() - cpu_before
    # VmHWM, not ru_maxrss: the latter survives exec, so a child would report its parent's peak.
    status = Path("/proc/self/status").read_text()
    peak_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    if mode == "pack-2":  # plus the largest worker (an overestimate: it counts from the fork)
        peak_kib += resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"seconds": seconds, "games": n_games, "tokens": n_tokens, "peak_mib": peak_kib / 1024, "cpu_per_wall": cpu / seconds}


def _bare_python_chess():  # type: ignore[no-untyped-def]
    import chess
    import numpy as np

    from tokpack.chess.schemes.san import BOS_ID, EOS_ID, TOKENS

    lut = np.zeros(256, dtype=np.uint16)
    for i, token in enumerate(TOKENS[4:], start=4):
        lut[ord(token)] = i

    def spell(uci: str, result: str) -> np.ndarray:
        board, words = chess.Board(), []
        for ply, text in enumerate(uci.split()):
            san = board.san_and_push(chess.Move.from_uci(text))
            words.append(f"{ply // 2 + 1}.{san}" if ply % 2 == 0 else san)
        body = lut[np.frombuffer(" ".join([*words, result]).encode(), dtype=np.uint8)]
        return np.concatenate(([BOS_ID], body, [EOS_ID])).astype(np.uint16)

    return spell


def _run_child(mode: str, scheme: str, games: Path, bpe_file: str, limit: int) -> dict[str, float]:
    code = ("import json, sys; sys.path.insert(0, %r); from bench_chess_pack import child; "
            "print(json.dumps(child(%r, %r, __import__('pathlib').Path(%r), %r, %d)))"
            % (str(Path(__file__).parent), mode, scheme, str(games), bpe_file, limit))
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cores_free() -> float:
    """How many cores two CPU-bound processes really get now (2.0 on an idle 2-core machine)."""
    burn = "import time; t = time.perf_counter(); sum(range(40_000_000)); print(time.perf_counter() - t)"

    def run(n: int) -> float:
        procs = [subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True) for _ in range(n)]
        return max(float(p.communicate()[0]) for p in procs)

    return 2 * run(1) / run(2)


def _repeated(source: Path, times: int, folder: Path) -> Path:
    """``source`` written ``times`` times over into one parquet (streamed: one copy in memory)."""
    import pyarrow.parquet as pq

    target = folder / f"games-x{times}.parquet"
    if not target.exists():
        table = pq.read_table(source, columns=COLUMNS)
        with pq.ParquetWriter(target, table.schema, compression="zstd") as writer:
            for _ in range(times):
                writer.write_table(table, row_group_size=65_536)
    return target


def _many_months_pgn(games: int, months: int, target: Path) -> Path:
    """The first ``games`` real games, game ``i`` re-dated to month ``i % months`` (from 1990-01)."""
    import re

    import zstandard

    text = zstandard.decompress(REAL_PGN.read_bytes()).decode("utf-8", errors="surrogateescape")
    pieces = re.split(r"\n\n(?=\[Event )", text)[:games]
    dated = [re.sub(r'\[Date "[^"]*"\]', f'[Date "{1990 + i % months // 12}.{i % months % 12 + 1:02d}.??"]', game, count=1)
             for i, game in enumerate(pieces)]
    target.write_text("\n\n".join(dated) + "\n", encoding="utf-8", errors="surrogateescape")
    return target


def _timed_cli(arguments: list[str], cwd: Path) -> tuple[float, float]:
    """CPU and wall seconds of ``tokpack ARGUMENTS`` in a fresh process (its workers included)."""
    code = "import sys; from tokpack.cli import main; sys.argv = ['tokpack', *sys.argv[1:]]; main()"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *arguments], check=True, capture_output=True, cwd=cwd,
                   env={**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def many_months(games: int, months: int, runs: int, schemes: list[str]) -> None:
    """Convert, then pack, ``games`` games spread over ``months`` months (see the module docstring)."""
    import shutil

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        pgn = _many_months_pgn(games, months, work / "games.pgn")
        (work / "tokpack-chess.toml").write_text('games_dir = "games"\nout_dir = "tokens"\n'
                                                 'train_months = "all"\nval_fraction = 0.05\n')
        times: dict[str, list[tuple[float, float]]] = {"convert": [], **{f"pack {s}": [] for s in schemes}}
        shards = entries = 0
        for _ in range(runs):
            shutil.rmtree(work / "games", ignore_errors=True)
            times["convert"].append(_timed_cli(["chess", "convert", str(pgn), "--out", "games"], work))
            for scheme in schemes:
                shutil.rmtree(work / "tokens", ignore_errors=True)
                times[f"pack {scheme}"].append(_timed_cli(["chess", "tokenize", "--scheme", scheme, "--pack"], work))
                train = work / "tokens" / scheme / "train"
                shards = len([p for p in train.iterdir() if p.is_dir()])
                entries = sum(1 for _ in train.rglob("*"))
        found = len(list((work / "games").glob("year=*/month=*/games.parquet")))
    print(f"### {games:,} games over {found} months, medians of {runs} (CPU s of the child process)\n")
    print("| step | CPU s | wall s |\n|---|---|---|")
    for step, measured in times.items():
        print(f"| {step} | {statistics.median(c for c, _ in measured):.2f} | {statistics.median(w for _, w in measured):.2f} |")
    print(f"\ntraining folder of the last pack: {shards} shards, {entries} entries (files and folders)\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--schemes", default="uci,san,bpe")
    parser.add_argument("--repeat-uci", type=int, default=35, help="copies of the real games packed for uci")
    parser.add_argument("--repeat-san", type=int, default=2)
    parser.add_argument("--repeat-bpe", type=int, default=4)
    parser.add_argument("--loop-games", type=str, default="uci=57000,san=3000,bpe=28499",
                        help="games the per-game loops encode (they are slow; rates are compared)")
    parser.add_argument("--bpe-size", type=int, default=4096)
    parser.add_argument("--memory", action="store_true", help="also uci pack-1 peak RSS at 1x, 8x and --repeat-uci")
    parser.add_argument("--months", action="store_true", help="only: convert, then pack, games spread over many months")
    parser.add_argument("--month-games", type=int, default=6000)
    parser.add_argument("--n-months", type=int, default=156)
    args = parser.parse_args()
    if args.months:
        many_months(args.month_games, args.n_months, args.runs, args.schemes.split(","))
        return
    if not REAL_GAMES.exists():
        sys.exit(f"real games not found at {REAL_GAMES}")
    loop_games = {k: int(v) for k, v in (pair.split("=") for pair in args.loop_games.split(","))}
    work = Path(tempfile.gettempdir()) / "tokpack-bench-chess"
    work.mkdir(exist_ok=True)
    bpe_file = work / f"bpe-{args.bpe_size}.json"
    if not bpe_file.exists():
        from tokpack.chess.schemes.uci_bpe import train_bpe_from_parquet

        train_bpe_from_parquet(REAL_GAMES, args.bpe_size, 20_000).save(bpe_file)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"runs: {args.runs} (medians); cores two busy processes got before the runs: {_cores_free():.2f}\n")
    repeats = {"uci": args.repeat_uci, "san": args.repeat_san, "bpe": args.repeat_bpe}
    for scheme in args.schemes.split(","):
        games = _repeated(REAL_GAMES, repeats[scheme], work)
        modes = ["pack-1", "pack-2", "loop"] + (["chess-loop"] if scheme == "san" else [])
        results: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        for _ in range(args.runs):
            for mode in modes:  # interleaved, so load on the shared machine hits every mode alike
                limit = loop_games[scheme] if mode.endswith("loop") else 1 << 62
                results[mode].append(_run_child(mode, scheme, games, str(bpe_file), limit))
        rate = {m: statistics.median(r["tokens"] / r["seconds"] for r in rs) for m, rs in results.items()}
        print(f"### {scheme}: {repeats[scheme]} x 28,499 real games ({results['pack-1'][0]['games']:,} games, "
              f"{results['pack-1'][0]['tokens']:,} tokens); loops on the first {loop_games[scheme]:,}\n")
        print("| mode | games/s | M tokens/s | peak RSS MiB | CPU s per s | vs loop |")
        print("|---|---|---|---|---|---|")
        for mode, rs in results.items():
            games_s = statistics.median(r["games"] / r["seconds"] for r in rs)
            peak = statistics.median(r["peak_mib"] for r in rs)
            busy = statistics.median(r["cpu_per_wall"] for r in rs)
            print(f"| {mode} | {games_s:,.0f} | {rate[mode] / 1e6:.2f} | {peak:.0f} | {busy:.2f} | {rate[mode] / rate['loop']:.1f}x |")
        print()
    print(f"cores two busy processes got after the runs: {_cores_free():.2f}\n")
    if args.memory:
        print("### uci pack-1 peak RSS as the input grows\n\n| games | tokens | peak RSS MiB | M tokens/s |\n|---|---|---|---|")
        for times in sorted({1, 8, args.repeat_uci}):
            r = _run_child("pack-1", "uci", _repeated(REAL_GAMES, times, work), str(bpe_file), 1 << 62)
            print(f"| {r['games']:,} | {r['tokens']:,} | {r['peak_mib']:.0f} | {r['tokens'] / r['seconds'] / 1e6:.2f} |")


if __name__ == "__main__":
    main()
