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
        if host in ("0.0.0.0", "::"):  # every interface: answer to this machine's own names too
            names += [socket.gethostname(), socket.getfqdn(), "127.0.0.1", "localhost"]
        extra = [f"{n}:{port}" for n in names]
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
