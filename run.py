#!/usr/bin/env python3
"""Run an experiment: ``python run.py EXPERIMENT.yaml [--set k=v ...] [--out DIR]``.

A thin wrapper around ``governed-broker run``; see ``python run.py --help``.
"""

import sys

from governed_broker.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        args = ["run", *args]
    elif not args or args[0] != "run":
        args = ["run", *args]
    sys.exit(main(args))
