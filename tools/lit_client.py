"""The command lit runs for uop-opt, uop-run and filecheck when tools/lit_server.py is up: it hands its stdin, stdout,
stderr, working directory, environment and arguments to the server, which forks the tool, and exits with the tool's
code. Only the standard library, and run with `python -S -I`, so it starts in ~10 ms.

Usage: python -S -I lit_client.py SOCKET_PATH TOOL_ID FALLBACK_PYTHON [ARGS...]; when the server cannot be reached the
tool runs as a process of its own (FALLBACK_PYTHON -m ...), so a test never depends on the server being up.
"""
import json
import os
import socket
import struct
import sys

# the tool ids lit passes (`_` where the names have `-`: lit.cfg.py's substitutions would match the names again)
_MODULES = {"uop_opt": "uopir.tools.uop_opt", "uop_run": "uopir.tools.uop_run", "file_check": "filecheck.main"}
_NAMES = {"uop_opt": "uop-opt", "uop_run": "uop-run", "file_check": "filecheck"}


def _fallback(python: str, tool: str, args: list[str]) -> None:
    code = f"import sys; from {_MODULES[tool]} import main; sys.argv[0] = {_NAMES[tool]!r}; sys.exit(main())"
    os.execv(python, [python, "-c", code, *args])


def main() -> int:
    path, tool, python, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        _fallback(python, tool, args)
    body = json.dumps({"argv": [_NAMES[tool], *args], "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(sock, [struct.pack("!I", len(body))], [0, 1, 2])
    sock.sendall(body)
    got = b""
    while len(got) < 4:
        chunk = sock.recv(4 - len(got))
        if not chunk:
            sys.stderr.write(f"lit_client: the {tool} server process died without an exit code\n")
            return 2
        got += chunk
    return struct.unpack("!i", got)[0]


if __name__ == "__main__":
    sys.exit(main())
