#!/usr/bin/python3 -I
"""`modal-sandbox-fs-tools` for the Modal test server's containers (stdlib Python, no deps).

The SDK implements `sandbox.filesystem.*` by exec'ing `/__modal/.bin/modal-sandbox-fs-tools
'<json command>'` inside the sandbox (modal/_utils/sandbox_fs_utils.py builds the commands and
parses the answers). Every container gets this file at that path. Commands, one JSON object a call:

    {"ReadFile": {"path": p}}                    -> the file's bytes on stdout
    {"WriteFile": {"path": p}}                   <- the bytes on stdin (parents created)
    {"ListFiles": {"path": p}}                   -> JSON list of entries on stdout
    {"Stat": {"path": p}}                        -> one JSON entry (a symlink, not its target)
    {"MakeDirectory": {"path": p, "parents": b}} -> parents: idempotent mkdir -p
    {"Remove": {"path": p, "recursive": b}}

A failure exits 1 with `{"error_kind": ..., "message": ..., "detail": ...}` on stderr, the kinds the
SDK maps to its exceptions: NotFound, NotDirectory, IsDirectory, PermissionDenied,
PathAlreadyExists, DirectoryNotEmpty, NotSupported, Other.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import sys
from typing import Any, BinaryIO

CHUNK = 1 << 16
KINDS = {
    errno.ENOENT: "NotFound",
    errno.ENOTDIR: "NotDirectory",
    errno.EISDIR: "IsDirectory",
    errno.EACCES: "PermissionDenied",
    errno.EPERM: "PermissionDenied",
    errno.EROFS: "PermissionDenied",
    errno.EEXIST: "PathAlreadyExists",
    errno.ENOTEMPTY: "DirectoryNotEmpty",
}
MESSAGES = {
    "NotFound": "No such file or directory",
    "NotDirectory": "Not a directory",
    "IsDirectory": "Is a directory",
    "PermissionDenied": "Permission denied",
    "PathAlreadyExists": "Path already exists",
    "DirectoryNotEmpty": "Directory not empty",
}
TYPES = {stat.S_IFDIR: "directory", stat.S_IFLNK: "symlink"}


class ToolError(Exception):
    def __init__(self, kind: str, message: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message or MESSAGES.get(kind, kind)
        self.detail = detail


def entry(path: str, name: str | None = None) -> dict[str, Any]:
    info = os.lstat(path)
    kind = TYPES.get(stat.S_IFMT(info.st_mode), "file")
    return {
        "name": name if name is not None else os.path.basename(path.rstrip("/")) or "/",
        "path": path,
        "type": kind,
        "size": info.st_size,
        "mode": info.st_mode,
        "permissions": stat.filemode(info.st_mode),
        "owner": str(info.st_uid),
        "group": str(info.st_gid),
        "modified_time": info.st_mtime,
        "symlink_target": os.readlink(path) if kind == "symlink" else None,
    }


def read_file(path: str, out: BinaryIO) -> None:
    if os.path.isdir(path):
        raise ToolError("IsDirectory")
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            out.write(chunk)
        out.flush()


def write_file(path: str, source: BinaryIO) -> None:
    parent = os.path.dirname(path)
    if parent:
        try:
            os.makedirs(parent, exist_ok=True)
        except FileExistsError:
            raise ToolError("NotDirectory") from None
    if os.path.isdir(path):
        raise ToolError("IsDirectory")
    with open(path, "wb") as handle:
        while chunk := source.read1(CHUNK):  # type: ignore[attr-defined]
            handle.write(chunk)


def list_files(path: str, out: BinaryIO) -> None:
    if not os.path.isdir(path):
        if not os.path.lexists(path):
            raise ToolError("NotFound")
        raise ToolError("NotDirectory")
    with os.scandir(path) as found:
        names = sorted(item.name for item in found)
    listed = [entry(os.path.join(path, name), name) for name in names]
    out.write(json.dumps(listed).encode() + b"\n")


def make_directory(path: str, parents: bool) -> None:
    if parents:
        if os.path.lexists(path) and not os.path.isdir(path):
            raise ToolError("PathAlreadyExists")
        try:
            os.makedirs(path, exist_ok=True)
        except FileExistsError:
            raise ToolError("NotDirectory") from None
    else:
        os.mkdir(path)


def remove(path: str, recursive: bool) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        if recursive:
            shutil.rmtree(path)
        else:
            os.rmdir(path)
    else:
        os.unlink(path)


def run(command: Any, stdin: BinaryIO, stdout: BinaryIO) -> None:
    if not isinstance(command, dict) or len(command) != 1:
        raise ToolError("Other", "malformed command")
    ((name, args),) = command.items()
    path = args.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ToolError("Other", f"path must be absolute: {path!r}")
    if name == "ReadFile":
        read_file(path, stdout)
    elif name == "WriteFile":
        write_file(path, stdin)
    elif name == "ListFiles":
        list_files(path, stdout)
    elif name == "Stat":
        stdout.write(json.dumps(entry(path)).encode() + b"\n")
    elif name == "MakeDirectory":
        make_directory(path, bool(args.get("parents", True)))
    elif name == "Remove":
        remove(path, bool(args.get("recursive", False)))
    else:
        raise ToolError("NotSupported", f"{name} is not supported by this fs tool")


def fail(stderr: BinaryIO, kind: str, message: str, detail: str = "") -> int:
    payload = {"error_kind": kind, "message": message, "detail": detail}
    stderr.write(json.dumps(payload).encode())
    stderr.flush()
    return 1


def main(
    argv: list[str],
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: BinaryIO | None = None,
) -> int:
    """One command; the streams default to the process's (agent.py passes its own when it runs
    the tool in-process)."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr.buffer
    try:
        run(json.loads(argv[0]) if argv else None, stdin, stdout)
        stdout.flush()
    except ToolError as error:
        return fail(stderr, error.kind, error.message, error.detail)
    except OSError as error:
        kind = KINDS.get(error.errno or 0, "Other")
        return fail(stderr, kind, MESSAGES.get(kind, error.strerror or str(error)), str(error))
    except (ValueError, KeyError, AttributeError) as error:
        return fail(stderr, "Other", f"invalid command: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
