"""The options of `adascale-bench submit`: the executor and the resources a cluster asks for."""

from __future__ import annotations

import argparse


def add_submit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", default="local", choices=("local", "slurm", "debug"))
    p.add_argument("--out", default="runs", help="results folder (default: runs)")
