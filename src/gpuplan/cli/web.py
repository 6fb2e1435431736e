"""`gpuplan web`: serve the web app and HTTP API (gpuplan.web) on this machine."""

from __future__ import annotations

import socket
from typing import List, Optional

import typer

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def register(app: typer.Typer) -> None:
    @app.command("web")
    def web(
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: this machine only)."),
        port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port."),
        open_browser: bool = typer.Option(False, "--open", help="Open the start page in a browser."),
        allow_host: Optional[List[str]] = typer.Option(
            None, "--allow-host", help="Another Host name the server answers to, e.g. the machine's DNS name (repeatable)."),
    ) -> None:
        """Local web app and HTTP API (pages at /, API at /api/v1, docs at /docs). Needs the `web` extra."""
        from gpuplan.errors import InputError

        try:
            import uvicorn

            from gpuplan.web.app import create_app
        except ImportError as exc:
            raise InputError(f"web: needs the web extra (pip install 'gpuplan[web]'): {exc}", field="web") from None
        names = list(allow_host or [])
        for name in names:  # a DNS name: 1-253 printable characters, no spaces (RFC 1035 2.3.4)
            if not 0 < len(name) <= 253 or not name.isascii() or not name.isprintable() or " " in name:
                raise InputError(f"--allow-host: {name[:40]!r} is not a host name (1-253 printable ASCII characters, "
                                 "no spaces)", field="allow_host", allowed="a host name")
        if host in ("0.0.0.0", "::"):  # every interface: answer to this machine's own names too
            names += [socket.gethostname(), socket.getfqdn(), "127.0.0.1", "localhost"]
        extra = [f"{n}:{port}" for n in names]
        check_can_listen(host, port)
        if host not in LOCAL_HOSTS:
            typer.echo(f"warning: binding {host}: anyone who can reach this address can use the server "
                       "(it has no authentication)", err=True)
        url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}/"
        typer.echo(f"gpuplan web: {url} (API docs {url}docs); Ctrl-C to stop", err=True)
        if open_browser:
            import threading
            import webbrowser

            threading.Timer(1.0, lambda: webbrowser.open(url)).start()
        uvicorn.run(create_app(host, port, extra_hosts=extra), host=host, port=port, log_level="warning")


def check_can_listen(host: str, port: int) -> None:
    """InputError (one line, exit 2) unless a server can listen on host:port now: the host resolves
    and the port is free (a port in use, a privileged port or an address not on this machine is
    refused here rather than by uvicorn after start-up)."""
    import errno

    from gpuplan.errors import InputError

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        raise InputError(f"host: cannot resolve '{host[:80]}' ({getattr(exc, 'strerror', None) or exc})", field="host",
                         allowed="an address or name of this machine") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a port in TIME_WAIT is free
        try:
            probe.bind(address)
        except OSError as exc:
            why = {errno.EADDRINUSE: "the port is in use (another server is listening there)",
                   errno.EACCES: "permission denied (ports below 1024 need privileges)",
                   errno.EADDRNOTAVAIL: "the address is not on this machine"}.get(exc.errno, exc.strerror or str(exc))
            raise InputError(f"port: cannot listen on {host}:{port}: {why}; give another --port or --host",
                             field="port", allowed="a free TCP port") from None
