"""The ``swrag`` command.

Subcommands:
    split   print the sliding windows of a file (or the bundled sample)
    demo    the main job on embedded defaults
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path
from typing import Sequence

from .windows import STRATEGIES, WindowConfig, iter_chunks

EXIT_USAGE = 2
EXIT_INPUT = 3


def sample_path() -> Path:
    """Path of the bundled sample document."""
    return Path(str(resources.files("swrag_integrations") / "data" / "sample.md"))


def _read_text(path: Path) -> str:
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"expected a file, got a directory: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text ({exc})") from exc


def _print_windows(text: str, config: WindowConfig, limit: int | None) -> int:
    count = 0
    for chunk in iter_chunks(config, text):
        if limit is None or count < limit:
            preview = chunk.text.replace("\n", "⏎")
            if len(preview) > 90:
                preview = preview[:60] + " … " + preview[-27:]
            print(f"  [{chunk.index:3d}] {chunk.start:6d}-{chunk.end:<6d} {preview}")
        count += 1
    if limit is not None and count > limit:
        print(f"  ... {count - limit} more")
    return count


def cmd_split(args: argparse.Namespace) -> int:
    path = Path(args.path) if args.path else sample_path()
    text = _read_text(path)
    strategies = [s.strip().upper() for s in args.strategy.split(",")]
    for strategy in strategies:
        step = args.step if args.step is not None else (3 if strategy == "DDS" else max(1, args.window // 4))
        config = WindowConfig(strategy=strategy, window_size=args.window, step=step, unit=args.unit)
        print(f"{strategy} window={args.window} step={step} unit={args.unit} ({path.name})")
        total = _print_windows(text, config, args.limit)
        print(f"  {total} windows\n")
    return 0


def cmd_demo_split(args: argparse.Namespace) -> int:
    """Split the bundled sample with all three strategies."""
    args.path, args.strategy, args.step = None, ",".join(STRATEGIES), None
    return cmd_split(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swrag",
        description="Sliding-window RAG: split documents into overlapping windows (FFS, DFS, DDS).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    split = sub.add_parser("split", help="print the windows of a text file", description="Print the windows of a UTF-8 text file.")
    split.add_argument("path", nargs="?", help="text file (default: the bundled sample document)")
    split.add_argument("--strategy", default="DDS", help="FFS, DFS, DDS or a comma-separated list (default: DDS)")
    split.add_argument("--window", type=int, default=128, help="window size in --unit (default: 128)")
    split.add_argument("--step", type=int, default=None, help="step: units for FFS/DFS (default window/4), delimiters for DDS (default 3)")
    split.add_argument("--unit", choices=["token", "char"], default="token", help="length unit (default: token)")
    split.add_argument("--limit", type=int, default=None, help="print at most this many windows per strategy")
    split.set_defaults(func=cmd_split)

    demo = sub.add_parser("demo", help="run the main job on the bundled sample", description="Split the bundled sample document with FFS, DFS and DDS and print the windows.")
    demo.add_argument("--window", type=int, default=128, help="window size (default: 128)")
    demo.add_argument("--unit", choices=["token", "char"], default="token", help="length unit (default: token)")
    demo.add_argument("--limit", type=int, default=6, help="windows printed per strategy (default: 6)")
    demo.set_defaults(func=cmd_demo_split)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.func(args)
    except BrokenPipeError:  # output piped into `head` and the like
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"swrag: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except (ValueError, TypeError) as exc:
        print(f"swrag: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
