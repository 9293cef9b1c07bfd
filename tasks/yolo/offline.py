"""Import ultralytics offline and contained: no network, nothing written outside a private temp dir.

ultralytics decides a lot at import time (utils/__init__.py): it probes DNS to set ONLINE, creates
a settings file under the user's config dir (~/.config/Ultralytics) with `sync: True` (telemetry and
Sentry), derives datasets/weights/runs dirs from the git checkout it sits in, and patches a few
process globals. So everything has to be in place BEFORE the first `import ultralytics`:

- YOLO_OFFLINE=1: the only offline switch 8.4 honours; it makes `is_online()` return False without
  the DNS probe, which turns off Sentry, events (telemetry) and hub calls that check ONLINE.
- YOLO_CONFIG_DIR=<private temp dir>, with a settings.json written there first: sync=False, every
  logger integration off, and datasets_dir / weights_dir / runs_dir inside the same temp dir, so
  nothing lands in ~/.config or next to the repository. The dir is removed at exit. The user's own
  YOLO_CONFIG_DIR is deliberately overridden: the suite must never touch the user's settings.
- YOLO_AUTOINSTALL=0: ultralytics may otherwise pip-install missing requirements at run time.
- YOLO_VERBOSE defaults to False (the engine does its own logging); a user value is kept.

We never call the code paths that download: no `weights=` (models are built from yaml), no trainer
(so no AMP check that fetches yolo11n.pt), plots off (no font download), and the dataset YAML is read
by tasks.yolo.data instead of `check_det_dataset` (which may download, exec a script, fetch fonts).

Process globals that importing ultralytics changes and that we put back: OMP_NUM_THREADS (set to 1
when unset, it would leak into DataLoader workers and rank subprocesses), torch.save (wrapped in a
retry loop), and torch/numpy print options.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from bench.core import safefs

_HOME: Path | None = None


def home() -> Path:
    """The private directory ultralytics uses as config, datasets, weights and runs dir."""
    ensure()
    assert _HOME is not None
    return _HOME


def _settings(root: Path) -> dict:
    """settings.json for ultralytics' SettingsManager (schema 0.0.8); unknown keys would be dropped."""
    return {
        "settings_version": "0.0.8",
        "datasets_dir": str(root / "datasets"),
        "weights_dir": str(root / "weights"),
        "runs_dir": str(root / "runs"),
        "uuid": "0" * 64,  # anonymous: nothing is ever sent, this only satisfies the schema
        "sync": False,
        "api_key": "",
        "openai_api_key": "",
        "clearml": False,
        "comet": False,
        "dvc": False,
        "mlflow": False,
        "raytune": False,
        "tensorboard": False,
        "wandb": False,
        "vscode_msg": False,
        "openvino_msg": False,
    }


def ensure() -> None:
    """Configure the environment and import ultralytics once per process (idempotent)."""
    global _HOME
    if _HOME is not None:
        return
    from tasks import require

    require("yolo")  # ultralytics is an optional extra: one line saying how to install it
    if "ultralytics" in sys.modules:
        warnings.warn(
            "ultralytics was imported before tasks.yolo.offline: its settings and online check were "
            "made without the suite's offline configuration",
            RuntimeWarning,
            stacklevel=2,
        )
    root = Path(tempfile.mkdtemp(prefix="adascale-ultralytics-"))
    atexit.register(shutil.rmtree, root, True)
    config = root / "Ultralytics"  # get_user_config_dir() appends this sub dir to YOLO_CONFIG_DIR
    safefs.mkdirs(config)  # in a fresh private mkdtemp folder, but through the one writer all the same
    safefs.write_text(config / "settings.json", json.dumps(_settings(root), indent=2))
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["YOLO_CONFIG_DIR"] = str(root)
    os.environ["YOLO_AUTOINSTALL"] = "0"
    os.environ.setdefault("YOLO_VERBOSE", "False")

    import numpy as np
    import torch

    omp = os.environ.get("OMP_NUM_THREADS")
    save = torch.save
    np_print = np.get_printoptions()
    import ultralytics  # noqa: F401  (the import is the point: it reads the environment set above)
    from ultralytics.utils import ONLINE, SETTINGS

    torch.save = save
    torch.set_printoptions(profile="default")
    np.set_printoptions(**np_print)
    if omp is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    if ONLINE or SETTINGS["sync"]:  # would mean ultralytics stopped honouring the switches above
        raise RuntimeError("ultralytics is not offline (ONLINE or settings sync still on)")
    _HOME = root
