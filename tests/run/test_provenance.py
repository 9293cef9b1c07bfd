"""Every run says which code and which machine made it (bench.run.provenance): the CPU kernels' instruction set
beside the library versions, so runs trained on two machines, whose float rounding differs, are told apart in the
report's header rather than averaged as one."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
import torch

from bench.core.files import read_json_object
from tests.helpers import spec_for, train

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_runs_summary_names_the_cpu_kernels_it_ran_on(tmp_path: Path) -> None:
    spec = spec_for("logreg", "adascale", 2, T1=40, eval_every=40)
    train(spec, tmp_path / "r")
    versions = read_json_object(tmp_path / "r" / "summary.json")["versions"]
    assert versions["cpu"] == f"{platform.machine()} {torch.backends.cpu.get_cpu_capability()}"
    assert versions["torch"] == torch.__version__ and json.dumps(versions)
