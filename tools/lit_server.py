#!/usr/bin/env python3
"""A fork server for the lit suite: one process imports uopir (and the Python filecheck) once, then forks a child per
RUN-line command that tools/lit_client.py hands it, so a command costs a fork instead of a Python start and ~0.2 s
of imports (the suite runs ~450 uop-opt/uop-run and ~350 filecheck commands).

A child is the tool as a fresh process would be, as far as the tests can see: it takes the client's stdin, stdout and
stderr (passed over the socket), its working directory, environment (uopir reads every setting at use, through
uopir.ir.env) and arguments, runs the tool's `main`, and reports the exit code. What a fork cannot give: settings
Python reads at its own start (PYTHONHASHSEED, PYTHONWARNINGS, -X options) are the server's.

Usage: lit_server.py SOCKET_PATH (lit_tests/lit.cfg.py starts it and stops it when lit exits). It exits when its
parent (lit) is gone, so a killed lit leaves no server behind.
"""
from __future__ import annotations

import io
import json
import os
import signal
import socket
import struct
import sys
import traceback

TOOLS = ("uop-opt", "uop-run", "filecheck")


def preload() -> None:
    """Import what the tools use, so that each child starts with it; nothing here depends on the environment of one
    test (the pass registry loads the test-* passes at use when $UOPIR_TEST_PASSES asks)."""
    import uopir.backends  # noqa: F401
    import uopir.search  # noqa: F401
    import uopir.tools.uop_opt  # noqa: F401
    import uopir.tools.uop_run  # noqa: F401
    from uopir.passes.registry import load_passes

    load_passes(test_passes=False)
    try:
        import filecheck.main  # noqa: F401
    except ImportError:
        pass


def _tool_main(tool: str):
    if tool == "uop-opt":
        from uopir.tools.uop_opt import main
    elif tool == "uop-run":
        from uopir.tools.uop_run import main
    else:
        from filecheck.main import main
    return main


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError("the client closed the connection")
        buf += chunk
    return buf


def _reopen_stdio() -> None:
    """New sys.stdin/stdout/stderr over the client's descriptors, made as Python makes them at its start: the
    server's were opened on other files (stdin on /dev/null, seekable, which a pipe is not)."""
    def wrap(fd: int, mode: str, like: io.TextIOWrapper, line_buffering: bool) -> io.TextIOWrapper:
        return io.TextIOWrapper(open(fd, mode + "b", closefd=False), encoding=like.encoding, errors=like.errors,
                                newline="\n", line_buffering=line_buffering)

    sys.stdin = sys.__stdin__ = wrap(0, "r", sys.__stdin__, False)
    sys.stdout = sys.__stdout__ = wrap(1, "w", sys.__stdout__, os.isatty(1))
    sys.stderr = sys.__stderr__ = wrap(2, "w", sys.__stderr__, True)


def run_child(conn: socket.socket) -> int:
    """In the forked child: become the client's command and run it; returns its exit code."""
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    if len(head) != 4 or len(fds) != 3:
        raise EOFError("a malformed request")
    request = json.loads(_recv_exact(conn, struct.unpack("!I", head)[0]))
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    _reopen_stdio()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tool, args = request["argv"][0], request["argv"][1:]
    sys.argv = [tool, *args]
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a closed pipe ends the command, as in a fresh process
    try:
        rc = _tool_main(tool)()
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else (print(e.code, file=sys.stderr) or 1))
    except BaseException:  # noqa: BLE001 - what the interpreter itself would print and exit with
        traceback.print_exc()
        rc = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return rc or 0


def _reap() -> None:
    """Wait for the finished children (their codes went by socket), so their CPU time counts in the server's, as a
    `time lit` measures it, and no zombies pile up."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] != 0:
            pass
    except ChildProcessError:
        pass


def serve(path: str) -> None:
    preload()
    parent = os.getppid()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    srv.settimeout(1.0)
    print("ready", flush=True)
    while True:
        _reap()
        try:
            conn, _ = srv.accept()
        except TimeoutError:
            if os.getppid() != parent:  # lit is gone
                return
            continue
        if os.fork() == 0:
            srv.close()
            rc = 2
            try:
                conn.settimeout(None)
                rc = run_child(conn)
                conn.sendall(struct.pack("!i", rc))
            except BaseException:  # noqa: BLE001 - the client sees the closed socket and reports it
                traceback.print_exc()
            finally:
                os._exit(rc if isinstance(rc, int) and 0 <= rc < 256 else 1)
        conn.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: lit_server.py SOCKET_PATH")
    serve(sys.argv[1])
