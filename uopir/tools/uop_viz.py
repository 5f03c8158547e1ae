"""uop-viz: show a rewrite trace (uop-opt --viz=FILE, UOPIR_VIZ=1) as the visualizer page.

    uop-viz TRACE.json [--port N]      serve the page on http://127.0.0.1:N/ (N=0, the default: any free port)
    uop-viz TRACE.json -o page.html    write the self-contained page instead (it opens from disk, no network)

The server is the standard library's http.server bound to 127.0.0.1 only; it serves the one page (the trace is
embedded in it) until Ctrl-C. A file that is not a trace, or a trace of another version: `uop-viz: error: ...`,
exit 1, never a traceback.
"""
from __future__ import annotations

import argparse
import http.server
import sys
from pathlib import Path

from uopir.tools.common import UsageError, add_plugin_options, add_version, check_output_file, load_plugins
from uopir.tools.uop_opt import escape_controls
from uopir.viz import TraceError, load_trace, render_page, write_page


def _handler(page: bytes) -> type[http.server.BaseHTTPRequestHandler]:
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?")[0].split("#")[0] not in ("/", "/index.html"):
                self.send_error(404, "uop-viz serves one page: /")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
            pass

    return Page


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="uop-viz", description="Show a uopir rewrite trace as the visualizer page.")
    add_version(ap)
    ap.add_argument("trace", nargs="?", help="trace file written by `uop-opt --viz=FILE` or UOPIR_VIZ=1")
    add_plugin_options(ap)
    ap.add_argument("-o", "--output", metavar="PAGE.html", help="write the self-contained page to this file")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 to serve on (default: any free port)")
    args = ap.parse_args(argv)
    try:
        listing = load_plugins(args)  # a trace may name a plugin's passes and patterns
        if listing is not None:
            print(listing, end="")
            return 0
        if args.trace is None:
            raise UsageError("the following arguments are required: trace")
        if args.output:
            check_output_file(args.output, "-o")
        trace = load_trace(args.trace)
        if args.output:
            out = write_page(trace, args.output)
            print(f"uop-viz: wrote {out} ({len(trace['passes'])} passes); open it in a browser")
            return 0
        page = render_page(trace).encode("utf-8")
    except (TraceError, UsageError) as e:
        print(f"uop-viz: error: {escape_controls(str(e))}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"uop-viz: error: {escape_controls(f'{args.output}: {e.strerror or e}')}", file=sys.stderr)
        return 1
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), _handler(page))
    except OverflowError:
        print(f"uop-viz: error: --port {args.port} is not a port number (0-65535)", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"uop-viz: error: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 1
    with server:
        print(f"uop-viz: serving {Path(args.trace).name} at http://127.0.0.1:{server.server_address[1]}/ "
              f"(Ctrl-C to stop)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
