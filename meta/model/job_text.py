"""A job file's bytes and text: bounded size, strict UTF-8, no NUL (no YAML here: the thin CLI reads files with it)."""

from __future__ import annotations

from pathlib import Path

from meta.model.limits import MAX_JOB_FILE_BYTES


class JobFileError(ValueError):
    """JobFileError is a job file that cannot be read or parsed; the message is one line."""


def read_job_bytes(path: str | Path) -> bytes:
    """read_job_bytes reads at most MAX_JOB_FILE_BYTES of a file, refusing a larger one."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_JOB_FILE_BYTES + 1)
    except OSError as exc:
        raise JobFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_JOB_FILE_BYTES:
        raise JobFileError(f"{path}: larger than {MAX_JOB_FILE_BYTES // 1024} KiB")
    return data


def decode_job_text(data: bytes, source: str) -> str:
    """decode_job_text decodes strict UTF-8 (a BOM is allowed) and refuses NUL bytes."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JobFileError(f"{source}: not valid UTF-8 (byte {exc.start})") from None
    if "\x00" in text:
        raise JobFileError(f"{source}: contains a NUL byte")
    return text
