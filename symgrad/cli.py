"""The ``symgrad`` command (also ``python -m symgrad``).

    symgrad tour                                   the seeds' network, symbolically and compiled
    symgrad check file.py:fn --arg x=f64[4,3]      cross-check a function's gradient
    symgrad export file.py:fn --arg x=f32[b,5] -o out/   save its value and gradient as an artifact
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="symgrad", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("tour", help="walk through the seeds' one-layer network, symbolically and compiled")
    from symgrad.check import command as check_command
    check_command.add_arguments(commands.add_parser("check", help="cross-check a function's gradient"))
    from symgrad import export_command
    export_command.add_arguments(commands.add_parser("export", help="save a function's value and gradient as "
                                                                    "a standalone artifact"))
    args = parser.parse_args(argv)
    if args.command == "tour":
        from symgrad import tour
        tour.run()
        return 0
    return export_command.run(args) if args.command == "export" else check_command.run(args)


if __name__ == "__main__":
    sys.exit(main())
