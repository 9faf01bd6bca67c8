"""A partitioned labels folder: the rows of one run as Parquet parts, written by `classify run --engine
ray` (classify.labeling.rayengine) and read wherever a labels file is (core.labelrow).

    labels/
      _run.json                       {"signature": ..., "parts": {...}, "complete": true|false}
      part-<hash of its ids>.parquet  the rows of one input block, in input order

A part is named by the ids it holds, so the same block labeled twice (a retried task) replaces its part
instead of adding a second one; each part is written atomically (temp file + rename), so a folder never
holds half a part. A folder whose run is not complete is refused by readers: its rows are not all there.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from classify.core.records import RecordsError, read_rows
from classify.core.writer import atomic_write_text, write_rows

RUN_FILE = "_run.json"
PART_GLOB = "part-*.parquet"


def is_parts_folder(path: Path) -> bool:
    return path.is_dir() and (path / RUN_FILE).is_file()


def part_name(ids: list[str]) -> str:
    return "part-" + hashlib.sha256("\0".join(ids).encode("utf-8")).hexdigest()[:20] + ".parquet"


def write_part(folder: Path, rows: list[dict[str, Any]]) -> str:
    """Write one part (atomically; nested values as JSON text, as a .parquet labels file has them)."""
    name = part_name([str(r["id"]) for r in rows])
    write_rows(folder / name, rows)
    return name


def parts(folder: Path) -> list[Path]:
    return sorted(folder.glob(PART_GLOB))


def part_ids(part: Path) -> list[str]:
    """The ids a part holds, read from its id column alone."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return [str(v) for v in pq.read_table(part, columns=["id"]).column("id").to_pylist()]
    except (pa.ArrowException, OSError, KeyError) as e:
        raise RecordsError(f"{part}: damaged part ({e}); remove it and run again") from None


def read_run(folder: Path) -> dict[str, Any]:
    try:
        run = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise RecordsError(f"{folder / RUN_FILE}: unreadable ({e}); remove the folder or pass --force") from None
    if not isinstance(run, dict):
        raise RecordsError(f"{folder / RUN_FILE}: not a JSON object; remove the folder or pass --force")
    return run


def write_run(folder: Path, signature: str, signature_parts: dict[str, str], *, complete: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(
        folder / RUN_FILE, json.dumps({"signature": signature, "parts": signature_parts, "complete": complete}) + "\n"
    )


def read_parts(folder: Path) -> list[dict[str, Any]]:
    """Every row of a finished run's folder, part after part."""
    if not read_run(folder).get("complete"):
        raise RecordsError(f"{folder}: the run writing it has not finished; run the same command again to finish it")
    return [row for p in parts(folder) for row in read_rows(p)]
