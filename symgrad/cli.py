"""The ``symgrad`` command: ``symgrad tour`` (and ``python -m symgrad tour``)."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="symgrad", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("tour", help="walk through the seeds' one-layer network, symbolically and compiled")
    args = parser.parse_args(argv)
    if args.command == "tour":
        from symgrad import tour
        tour.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
