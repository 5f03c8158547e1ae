"""The command lit runs for uop-opt, uop-run and filecheck when tools/lit_server.py is up: it hands its stdin, stdout,
stderr, working directory, environment and arguments to the server, which forks the tool, and exits with the tool's
code. Only the standard library, and run with `python -S -I`, so it starts in ~10 ms.

Usage: python -S -I lit_client.py SOCKET_PATH TOOL_ID FALLBACK_PYTHON [ARGS...]; when the server cannot be reached the
tool runs as a process of its own (FALLBACK_PYTHON -m ...), so a test never depends on the server being up.

TOOL_ID `file_check_both` takes another FileCheck's path before ARGS (LLVM's): the input is checked by that one and
by the Python filecheck, and the command fails when either does, saying which. Why: the lit suite must stay valid for
both tools, and one lit run that checks each output twice costs a FileCheck process per check, where a second lit run
costs every uop-opt/uop-run command again.
"""
import json
import os
import socket
import struct
import subprocess
import sys

# the tool ids lit passes (`_` where the names have `-`: lit.cfg.py's substitutions would match the names again)
_MODULES = {"uop_opt": "uopir.tools.uop_opt", "uop_run": "uopir.tools.uop_run", "file_check": "filecheck.main"}
_NAMES = {"uop_opt": "uop-opt", "uop_run": "uop-run", "file_check": "filecheck"}


def _fallback_code(tool: str) -> str:
    return f"import sys; from {_MODULES[tool]} import main; sys.argv[0] = {_NAMES[tool]!r}; sys.exit(main())"


def _through_server(path: str, tool: str, args: list[str], stdin: int = 0) -> int | None:
    """Run the tool in the server with `stdin` as its fd 0 and our stdout/stderr; its exit code, or None when the
    server cannot be reached."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        return None
    body = json.dumps({"argv": [_NAMES[tool], *args], "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(sock, [struct.pack("!I", len(body))], [stdin, 1, 2])
    sock.sendall(body)
    got = b""
    while len(got) < 4:
        chunk = sock.recv(4 - len(got))
        if not chunk:
            sys.stderr.write(f"lit_client: the {tool} server process died without an exit code\n")
            return 2
        got += chunk
    return struct.unpack("!i", got)[0]


def _both(path: str, python: str, other: str, args: list[str]) -> int:
    """Check stdin with `other` (LLVM's FileCheck) and with the Python filecheck; the first failing code, or 0."""
    data = sys.stdin.buffer.read()
    rc_other = subprocess.run([other, *args], input=data).returncode
    fd = os.memfd_create("filecheck-input")  # the input again, as a file the server child can read from the start
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        rc_py = _through_server(path, "file_check", args, fd)
        if rc_py is None:
            rc_py = subprocess.run([python, "-c", _fallback_code("file_check"), *args], stdin=fd).returncode
    finally:
        os.close(fd)
    if (rc_other == 0) != (rc_py == 0):
        print(f"lit_client: {other} exited {rc_other} but the Python filecheck exited {rc_py}: the two FileChecks "
              f"read this file's checks differently", file=sys.stderr)
    return rc_other or rc_py


def main() -> int:
    path, tool, python, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if tool == "file_check_both":
        return _both(path, python, args[0], args[1:])
    rc = _through_server(path, tool, args)
    if rc is None:
        os.execv(python, [python, "-c", _fallback_code(tool), *args])
    return rc


if __name__ == "__main__":
    sys.exit(main())
