"""script reads a batch script and binds its command-line arguments into the script text.

A spec stores the script *text* (the file may change or vanish before the job runs) and has
no field for arguments, so ``msbatch job.sh a b`` inserts ``set -- 'a' 'b'`` as the first
command after the leading comment block: ``"$@"`` then works as under sbatch, the ``#SBATCH``
block stays intact, and the arguments are part of the spec (and so of its idempotency hash).

metasched's launcher runs a spec's script with ``bash -c`` (``slurm_bridge.render``), so the
shebang must name a POSIX-style shell: a Python or Perl batch script is refused at submit
rather than failing at run time. Like sbatch, a script must start with ``#!`` and must not
have DOS line breaks. The text is kept byte for byte: it is read without newline translation
(which would turn ``\r\n`` into ``\n`` before the check could see it) and split at ``\n`` only.
"""

from __future__ import annotations

import shlex
from pathlib import Path, PurePosixPath

from cli.sbatch.options import SbatchError, directive_block_end, script_lines
from meta.model.limits import MAX_SCRIPT_BYTES

_SHELLS = {"sh", "bash", "dash", "ash", "ksh", "mksh", "zsh"}
_ARGS_COMMENT = "# msbatch: the script's command-line arguments"
# sbatch's own words (src/sbatch/sbatch.c, two error lines there; one line here)
DOS_LINE_BREAKS = (
    "Batch script contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks (\\n)."
)


def read_script(path: str) -> str:
    """read_script returns a script's text or raises SbatchError saying why it cannot be read."""
    file = Path(path)
    if not file.exists():
        raise SbatchError([f"script {path!r} not found"])
    if file.is_dir():
        raise SbatchError([f"script {path!r} is a directory"])
    try:
        # bytes, then decode: read_text's universal newlines would hide \r\n from check_script;
        # at most one byte past the cap, so a huge file costs nothing to refuse
        with open(file, "rb") as handle:
            data = handle.read(MAX_SCRIPT_BYTES + 1)
        if len(data) > MAX_SCRIPT_BYTES:
            raise SbatchError([f"script {path!r} is larger than {MAX_SCRIPT_BYTES // 1024} KiB"])
        text = data.decode("utf-8")
    except OSError as exc:
        raise SbatchError([f"cannot read script {path!r}: {exc.strerror}"]) from None
    except UnicodeDecodeError:
        raise SbatchError([f"script {path!r} is not a UTF-8 text file"]) from None
    check_script(text, path)
    return text


def check_script(text: str, path: str) -> None:
    """check_script refuses what sbatch refuses (no ``#!``, DOS line breaks) and non-shell interpreters."""
    if not text.startswith("#!"):
        raise SbatchError(
            [
                f"script {path!r} does not look like a batch script: the first line must start "
                "with #! followed by the path to an interpreter (e.g. #!/bin/bash)"
            ]
        )
    if "\r\n" in text:
        raise SbatchError([DOS_LINE_BREAKS])
    program = interpreter(text)
    if program not in _SHELLS:
        raise SbatchError(
            [
                f"script {path!r} runs {program or '?'}: metasched runs batch scripts with bash, use #!/bin/bash"
            ]
        )


def interpreter(text: str) -> str:
    """interpreter is the program named by the shebang, with ``/usr/bin/env [-S]`` looked through."""
    words = script_lines(text)[0][2:].split()
    if words and PurePosixPath(words[0]).name == "env":
        words = [word for word in words[1:] if not word.startswith("-")]
    return PurePosixPath(words[0]).name if words else ""


def bind_arguments(text: str, args: tuple[str, ...]) -> str:
    """bind_arguments returns the script with ``set -- args`` before its first command (unchanged without args)."""
    if not args:
        return text
    lines = script_lines(text)
    if lines[-1] == "":
        lines.pop()  # the text ended with a newline: no line after it
    at = directive_block_end(lines)
    lines.insert(at, f"set -- {shlex.join(args)}  {_ARGS_COMMENT}")
    return "\n".join(lines) + "\n"
