"""Read a user's text file (input, gold, codebook, sheet) as UTF-8, or fail naming file and line.

Python's own UnicodeDecodeError names a byte offset and no file, and escapes as a traceback; every
reader of a file a user hands us goes through here instead, with the error class of its caller.
"""

from __future__ import annotations

from pathlib import Path

BOM = b"\xef\xbb\xbf"


def utf8_problem(data: bytes, pos: int) -> tuple[int, str]:
    """(line, "not valid UTF-8 (byte 0x.. at column C)") for an undecodable byte at `pos` of `data`."""
    line_start = data.rfind(b"\n", 0, pos) + 1
    line = data.count(b"\n", 0, pos) + 1
    return line, f"not valid UTF-8 (byte 0x{data[pos]:02x} at column {pos - line_start + 1})"


def decode_utf8(data: bytes, source: str | Path, error: type[Exception]) -> str:
    """`data` as text; a leading BOM (spreadsheet programs write one) is dropped."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, what = utf8_problem(data, e.start)
        raise error(f"{source}: line {line}: {what}; save the file as UTF-8") from None


def read_text(path: str | Path, error: type[Exception]) -> str:
    """The text of `path`; invalid UTF-8 raises `error` naming the file and the line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror or e}") from None
    return decode_utf8(data, path, error)
