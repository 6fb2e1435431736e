"""`gpuplan web`: the FastAPI application (HTTP API + pages), a thin shell over `gpuplan.api`.

- `POST /api/v1/<command words>` (endpoints.ENDPOINTS): the body is the api function's keyword
  arguments as JSON, the answer is `result.to_dict()` (the command's `--json`), and the header
  `X-Gpuplan-Command` is the `gpuplan ... --json` line that prints the same JSON (as printable
  ASCII: other characters escaped, at most MAX_HEADER_CHARS, `header_value`; raw input never goes
  into a header).
- The body is JSON of at most MAX_BODY_BYTES, checked with the CLI's rules: strict types (`true` is
  not 1, `"8"` is not 8), finite numbers (`1e400` is a 422 naming the field), bounded strings and
  lists (endpoints.MAX_TEXT_CHARS, MAX_LIST_ITEMS), and no path on the server's disk in a field
  that names a model or a dataset (endpoints.PATH_FIELDS: bundled names only).
- `POST /api/v1/validate` (or its form field `builtin`: a public set shipped with gpuplan),
  `POST /api/v1/calibrate/fit` and `POST /api/v1/formats/compare-file` take an uploaded file
  (multipart, at most MAX_UPLOAD_BYTES, kept in a temporary directory removed
  after the call). `calibrate/fit` answers `gpuplan calibrate fit FILE --json` plus the profile's
  TOML text (`profile_toml`): the page offers it for download, the server writes no profile.
- Bad input: HTTP 400 (gpuplan InputError) or 422 (an infeasible request, or a body that is not
  the right JSON type), body `{"error": <the CLI's one line after "error: ">, "field": ...}`;
  never a 500 or a traceback.
- Local means local: a request whose Host header is not the bound host:port is refused (403;
  DNS-rebinding defence); no CORS headers are sent, so other origins cannot read answers.
- Pages: GET `/`, `/plan`, `/train`, ... (pages.PAGES), one HTML shell + static/app.js; GET `/docs`:
  Swagger UI over `/openapi.json`, from bundled files (DOCS_ASSETS). No page loads anything from
  another host (tests/web/test_offline.py).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from pydantic import ConfigDict, ValidationError, create_model

from gpuplan import api
from gpuplan.errors import GpuplanError, InputError
from gpuplan.output_files import write_atomic
from gpuplan.web.endpoints import ENDPOINTS, PATH_FIELDS, Endpoint, command
from gpuplan.web.pages import PAGES, page_html

MAX_UPLOAD_BYTES = 5 * 2**20  # 5 MiB: a validation CSV is ~100 kB; a tensor for `formats compare` a few MB
#: a JSON request body: the largest real one (10,000 MIG profiles) is ~100 kB
MAX_BODY_BYTES = 2**20
#: longest X-Gpuplan-Command header (servers refuse headers past ~8 KiB in all)
MAX_HEADER_CHARS = 2000
STATIC = Path(__file__).parent / "static"
#: where /docs's Swagger UI files (swagger-ui-bundle.js, swagger-ui.css, favicon.png; fastapi-offline's copies) are served
DOCS_ASSETS = "/static-docs"
log = logging.getLogger("gpuplan.web")


def error_response(message: str, field: str | None, status: int, allowed: str | None = None) -> JSONResponse:
    """`{"error": {"field", "allowed", "message"}}`: the object `gpuplan ... --json` prints for the same error."""
    message = "; ".join(p.strip() for p in str(message).splitlines() if p.strip())
    return JSONResponse({"error": {"field": field, "allowed": allowed, "message": message}}, status_code=status)


def gpuplan_error(exc: Exception) -> JSONResponse:
    """The CLI's one line (cli/main.py prints `error: {exc}`) as JSON, 400 for bad input, 422 else."""
    if isinstance(exc, InputError):
        return error_response(str(exc), exc.field, 400, getattr(exc, "allowed", None))
    if isinstance(exc, GpuplanError):
        return error_response(str(exc), getattr(exc, "field", None), 422)
    log.exception("unexpected error")  # on the server's console; the page gets one line
    return error_response(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'unexpected error'}",
                          None, 400)


def validation_message(exc: ValidationError) -> tuple[str, str]:
    """One line naming the field, as the api's own checks do: `--gpus: Input should be a valid integer`."""
    err = exc.errors()[0]
    if not err["loc"]:
        return f"body: {err['msg']}", "body"
    field = str(err["loc"][0])
    return f"--{field.replace('_', '-')}: {err['msg']}", field


#: one api call at a time: the calls are CPU-bound Python (the GIL serialises them anyway), and
#: library state such as knob overrides and catalog caches is process-wide, not per request
API_LOCK = threading.Lock()


def header_value(text: str, limit: int = MAX_HEADER_CHARS) -> str:
    """`text` as a safe header value: printable ASCII only (a newline, NUL or any other character is
    written as a Python escape, `\\n`, `\\x00`, `\\u00e9`), at most `limit` characters (cut with
    '...'). A raw newline in a header would end it, and the server would drop the answer."""
    safe = "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii") for c in text)
    return safe if len(safe) <= limit else safe[: limit - 3] + "..."


def run(fn, kwargs: dict[str, Any], cmd: str) -> Response:
    headers = {"X-Gpuplan-Command": header_value(cmd)}  # the line that prints the same JSON (or error)
    try:
        with API_LOCK:
            data = fn(**kwargs).to_dict()
    except Exception as exc:  # noqa: BLE001 - every error becomes one line (module docstring)
        resp = gpuplan_error(exc)
        resp.headers.update(headers)
        return resp
    return JSONResponse(data, headers=headers)


def names_server_path(value: str) -> bool:
    """True when `value` names something on the server's disk (or could, once expanded): an existing
    path, an absolute, home-relative or dot-relative path. Bundled names never do."""
    if value.startswith(("/", "~", ".", "\\")):
        return True
    return os.path.lexists(value)


def server_path_error(values: dict[str, Any]) -> Response | None:
    """A 400 naming the first field of endpoints.PATH_FIELDS whose value is a path on the server."""
    for name in PATH_FIELDS & set(values):
        value = values[name]
        if isinstance(value, str) and names_server_path(value):
            return error_response(f"{name}: the web API takes bundled names only, not a path on the server "
                                  f"('{header_value(value, 60)}'); upload-free commands name models and datasets "
                                  "by their bundled names (`gpuplan model list`)", name, 400,
                                  "a bundled name")
    return None


async def read_body(request: Request) -> bytes:
    """The request body, InputError past MAX_BODY_BYTES (read in chunks, never whole first)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise InputError(f"body: larger than {MAX_BODY_BYTES // 1024} KiB", field="body",
                             allowed=f"a JSON object of <= {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def request_model(ep: Endpoint):
    fields = {name: (typ, default) for name, (typ, default) in ep.fields().items()}
    name = "".join(w.title().replace("-", "") for w in ep.words) + "Request"
    # strict: JSON types as the CLI's rules read them (`true` is not 1); finite floats only
    return create_model(name, __config__=ConfigDict(extra="forbid", strict=True, allow_inf_nan=False), **fields)


def add_endpoint(app: FastAPI, ep: Endpoint) -> None:
    model = request_model(ep)

    async def handler(request: Request) -> Response:
        try:
            raw = await read_body(request)
        except InputError as exc:
            return error_response(str(exc), exc.field, 413, exc.allowed)
        try:
            body = model.model_validate_json(raw or b"{}")
        except ValidationError as exc:
            msg, field = validation_message(exc)
            return error_response(msg, field, 422)
        values = body.model_dump(exclude_unset=True)
        refused = server_path_error(values)
        if refused is not None:
            return refused
        from starlette.concurrency import run_in_threadpool

        return await run_in_threadpool(run, ep.fn, values, command(ep, values))

    handler.__doc__ = (ep.fn.__doc__ or "").strip() + f"\n\nSame JSON as `gpuplan {' '.join(ep.words)} ... --json`."
    app.add_api_route(ep.path, handler, methods=["POST"], name=ep.fn_name, summary=f"gpuplan {' '.join(ep.words)}",
                      openapi_extra={"requestBody": {"content": {"application/json": {
                          "schema": model.model_json_schema()}}, "required": False}},
                      tags=[ep.words[0]])


async def read_upload(upload: UploadFile) -> bytes:
    """The uploaded bytes, InputError past MAX_UPLOAD_BYTES (read in bounded chunks)."""
    chunks, size = [], 0
    while chunk := await upload.read(2**16):
        size += len(chunk)
        if size > MAX_UPLOAD_BYTES:
            raise InputError(f"file: larger than the {MAX_UPLOAD_BYTES // 2**20} MiB upload limit", field="file")
        chunks.append(chunk)
    return b"".join(chunks)


def safe_name(name: str | None, default: str) -> str:
    """A plain file name for the temporary copy (no directories)."""
    base = Path(name or default).name
    return "".join(c for c in base if c.isalnum() or c in "._-") or default


@dataclass(frozen=True)
class CalibrationAnswer:
    """`calibrate/fit`'s answer: `gpuplan calibrate fit NAME --json` (NAME the uploaded file's name, in
    the folder where it lies) and the profile that `--out profile.toml` would write, as text."""

    result: Any  # api.FitProfileResult

    def to_dict(self) -> dict:
        return {**self.result.to_dict(), "profile_toml": self.result.calibration.profile_text()}


def calibrate_upload(path: Path, name: str, **options: Any) -> CalibrationAnswer:
    """`api.calibrate_fit` on the temporary copy `path` of an upload named `name`; no profile and no
    plot are written. The sources name the upload, not the temporary path (the JSON and the profile's
    `[[sources]] path` are what the CLI prints when run beside the file; the sha256 is of its bytes)."""
    result = api.calibrate_fit(str(path), None, **options)
    cal = result.calibration
    cal.sources = [dataclasses.replace(s, path=name) for s in cal.sources]
    return CalibrationAnswer(result)


async def run_on_upload(file: UploadFile, default_name: str, fn: Callable[[Path, str], Any],
                        command_for: Callable[[str], str]) -> Response:
    """Read an upload (size-bounded, `read_upload`), write it to a fresh temporary folder under its
    safe name, run `fn(path, name)` in a worker thread as the CLI command `command_for(name)` would
    (`run`: its JSON, or the one-line error as 4xx), and remove the folder."""
    from starlette.concurrency import run_in_threadpool

    try:
        data = await read_upload(file)
    except InputError as exc:
        return gpuplan_error(exc)
    name = safe_name(file.filename, default_name)
    with tempfile.TemporaryDirectory(prefix="gpuplan-web-") as tmp:
        path = Path(tmp) / name
        write_atomic(path, data, "file")
        return await run_in_threadpool(run, lambda: fn(path, name), {}, command_for(name))


def host_allowed(host_header: str | None, allowed: frozenset[str]) -> bool:
    return host_header is not None and host_header.lower() in allowed


def create_app(host: str = "127.0.0.1", port: int = 8000, *, extra_hosts: Iterable[str] = ()) -> FastAPI:
    """The app for a server bound to host:port; requests naming another Host are refused."""
    names = {host} | ({"localhost", "127.0.0.1"} if host in ("127.0.0.1", "localhost") else set())
    allowed = frozenset({f"{n}:{port}" for n in names} | ({*names} if port == 80 else set()) | set(extra_hosts))
    # /docs: Swagger UI from the files fastapi-offline ships (DOCS_ASSETS), never a CDN; no ReDoc (its
    # sidebar loads a logo from cdn.redoc.ly) and no validator badge (validatorUrl: validator.swagger.io)
    app = FastAPIOffline(title="gpuplan", description="gpuplan's HTTP API: each endpoint answers exactly the JSON of the "
                         "`gpuplan` command of the same name with --json (both come from gpuplan.api).",
                         version=getattr(__import__("gpuplan"), "__version__", "0"), redoc_url=None,
                         static_url=DOCS_ASSETS, swagger_ui_parameters={"validatorUrl": None})

    @app.middleware("http")
    async def local_only(request: Request, call_next):
        if not host_allowed(request.headers.get("host"), allowed):
            return error_response(f"host: '{request.headers.get('host')}' is not this server's address "
                                  f"(allowed: {', '.join(sorted(allowed))})", "host", 403)
        try:
            return await call_next(request)
        except Exception as exc:  # noqa: BLE001 - never a 500 with a traceback
            return gpuplan_error(exc)

    for ep in ENDPOINTS:
        add_endpoint(app, ep)

    @app.post("/api/v1/validate", tags=["validate"], summary="gpuplan validate FILE | --builtin NAME")
    async def validate(file: Optional[UploadFile] = File(None), builtin: Optional[str] = Form(None)) -> Response:
        """Upload a CSV of SCHEMA.md rows, or name a public set shipped with gpuplan (`builtin`: training,
        inference, collectives); the answer is `gpuplan validate FILE --json` or `gpuplan validate
        --builtin NAME --json`."""
        name = (builtin or "").strip()
        if file is None or name:  # a set by name; api.validate answers 400 unless exactly one of the two is given
            from starlette.concurrency import run_in_threadpool

            upload = None if file is None else safe_name(file.filename, "upload.csv")
            words = [upload] if upload else []
            return await run_in_threadpool(run, api.validate, {"file": upload, "builtin": name or None},
                                           shlex.join(["gpuplan", "validate", *words,
                                                       *(["--builtin", name] if name else []), "--json"]))
        return await run_on_upload(file, "upload.csv", lambda path, name: api.validate(file=str(path)),
                                   lambda name: f"gpuplan validate {name} --json")

    @app.post("/api/v1/calibrate/fit", tags=["calibrate"], summary="gpuplan calibrate fit FILE")
    async def calibrate_fit(file: Optional[UploadFile] = File(None), method: str = Form("auto"),
                            knobs: Optional[str] = Form(None)) -> Response:
        """Upload a CSV of ../shared/validation/SCHEMA.md rows; the answer is `gpuplan calibrate fit FILE
        --json` (FILE the upload's name) plus `profile_toml`, the text of the profile `--out` would write.
        `method`: auto, hierarchical or flat; `knobs`: comma-separated knob names. Nothing is kept."""
        if file is None:
            return gpuplan_error(InputError("file: choose a CSV file of measured rows to upload", field="file"))
        options: dict[str, Any] = {"method": method}
        flags: list[str] = []
        if knobs is not None and knobs.strip():
            options["knobs"] = knobs
            flags += ["--knobs", knobs]
        if method != "auto":
            flags += ["--method", method]
        return await run_on_upload(file, "measurements.csv", lambda path, name: calibrate_upload(path, name, **options),
                                   lambda name: shlex.join(["gpuplan", "calibrate", "fit", name, *flags, "--json"]))

    @app.post("/api/v1/formats/compare-file", tags=["formats"], summary="gpuplan formats compare FILE")
    async def formats_compare_file(file: UploadFile = File(...), tensor: Optional[str] = Form(None),
                                   formats: Optional[str] = Form(None), scale_rule: str = Form("floor")) -> Response:
        """Upload a .npy / .safetensors tensor; the answer is `gpuplan formats compare FILE --json`."""
        kwargs: dict[str, Any] = {"scale_rule": scale_rule}
        if tensor:
            kwargs["tensor"] = tensor
        if formats:
            kwargs["formats"] = formats
        ep = next(e for e in ENDPOINTS if e.fn_name == "formats_compare")
        return await run_on_upload(file, "tensor.npy", lambda path, name: api.formats_compare(file=str(path), **kwargs),
                                   lambda name: command(ep, kwargs, file_arg=name))

    @app.get("/static/vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> Response:
        """plotly.js as bundled in the `plotly` Python package (offline: no CDN)."""
        import plotly

        return FileResponse(Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
                            media_type="application/javascript")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    for page in PAGES:
        def serve_page(name: str = page.name) -> HTMLResponse:
            return HTMLResponse(page_html(name))

        app.add_api_route(page.path, serve_page, methods=["GET"], include_in_schema=False, name=f"page_{page.name}")
        if page.path == "/plan":
            app.add_api_route("/", serve_page, methods=["GET"], include_in_schema=False, name="page_root")
    return app
