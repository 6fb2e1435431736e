"""`gpuplan web` needs no network: no page, stylesheet or script of ours names another host, and every
asset a page loads is served by the app itself. (tests/web/test_browser.py proves it in Chromium: with
every request to another host blocked, no page and not /docs even tries one.)"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from gpuplan.web.app import DOCS_ASSETS, STATIC
from gpuplan.web.pages import PAGES

#: an absolute http(s) URL
URL = re.compile(r"https?://[^\s\"'<>()\\`]+", re.IGNORECASE)
LOCAL_HOSTS = {"127.0.0.1", "localhost"}

#: URLs that are names, not addresses: XML namespaces (the SVG in a data: URI of swagger-ui.css)
NAMESPACES = ("http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink")

#: the third-party bundles the pages load, and the hosts named inside them as text: links in help and
#: error messages, RFC and JSON-schema identifiers, and (plotly) the tile servers, fonts and topojson
#: of map and geo traces, which no page draws (test_no_page_draws_maps). A host new to a bundle (an
#: upgrade that adds a web font, say) fails the test until someone looks at what it loads.
BUNDLES = {
    f"{DOCS_ASSETS}/swagger-ui-bundle.js": {
        "datatracker.ietf.org", "www.w3.org", "www.rfc-editor.org", "spec.openapis.org", "github.com",
        "validator.swagger.io", "json-schema.org", "www.tiktok.com", "twitter.com", "instagram.com", "example.com",
        "www.facebook.com", "vladimirgorej.com", "swagger.io", "spdx.org", "soundcloud.com", "redux.js.org",
        "reactjs.org", "fb.me",
        "base${string", "실례.com",  # a template literal's `https://base${...}`; an IDN example in its URL code
    },
    f"{DOCS_ASSETS}/swagger-ui.css": {"www.w3.org"},
    "/static/vendor/plotly.min.js": {
        "www.w3.org", "github.com", "geoserveis.icgc.cat", "fonts.openmaptiles.org", "feross.org",
        "basemaps.cartocdn.com", "plotly.com", "tilemaps.icgc.cat", "server.arcgisonline.com", "maplibre.org",
        "get.webgl.org", "www.esri.com", "www.openstreetmap.org", "wiki.openstreetmap.org",
        "tiles.basemaps.cartocdn.com", "tile.openstreetmap.org", "cloud.plotly.com", "cdn.plot.ly",
        "cdn.jsdelivr.net", "syntheti.cc", "getify.mit-license.org",
    },
}


class Links(HTMLParser):
    """Every URL an HTML document makes the browser load: src, href of stylesheets and icons."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("src"):
            self.loads.append(a["src"])
        if tag == "link" and a.get("href"):
            self.loads.append(a["href"])


def remote(text: str) -> list[str]:
    """The absolute URLs in `text` that name a host other than this machine (namespaces excepted)."""
    return [u for u in URL.findall(text)
            if urlsplit(u).hostname not in LOCAL_HOSTS and not u.startswith(NAMESPACES)]


def page_paths() -> list[str]:
    return ["/", *(p.path for p in PAGES), "/docs", "/docs/oauth2-redirect"]


def test_no_page_names_another_host(client):
    for path in page_paths():
        r = client.get(path)
        assert r.status_code == 200, path
        assert remote(r.text) == [], path


def test_every_asset_a_page_loads_is_served_here(client):
    seen: set[str] = set()
    for path in page_paths():
        parser = Links()
        parser.feed(client.get(path).text)
        for ref in parser.loads:
            url = urljoin(f"http://127.0.0.1:8000{path}", ref)
            parts = urlsplit(url)
            if parts.scheme == "data":
                continue
            assert parts.hostname in LOCAL_HOSTS, (path, ref)
            seen.add(parts.path)
    for asset in seen:
        assert client.get(asset).status_code == 200, asset
    # the app's own shell, and Swagger UI's script, style and icon
    assert {"/static/style.css", "/static/app.js", "/static/vendor/plotly.min.js",
            f"{DOCS_ASSETS}/swagger-ui-bundle.js", f"{DOCS_ASSETS}/swagger-ui.css", f"{DOCS_ASSETS}/favicon.png"} <= seen


def test_our_scripts_and_styles_name_no_other_host(client):
    for file in sorted(STATIC.glob("*")):
        if file.suffix in (".js", ".css"):
            text = client.get(f"/static/{file.name}").text
            assert remote(text) == [], file.name
            # and no url() or import that leaves the app (fonts, images)
            assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", text), file.name


def test_third_party_bundles_name_only_the_hosts_we_looked_at(client):
    for path, hosts in BUNDLES.items():
        r = client.get(path)
        assert r.status_code == 200, path
        found = {urlsplit(u).hostname or "" for u in remote(r.text)} - {""}
        assert found <= hosts, (path, sorted(found - hosts))


def test_swagger_ui_is_told_not_to_call_the_validator(client):
    # Swagger UI's default validatorUrl is https://validator.swagger.io/validator (its badge is an image
    # from there); /docs sets it to null. ReDoc is not offered: its sidebar loads cdn.redoc.ly's logo.
    html = client.get("/docs").text
    assert '"validatorUrl": null' in html
    assert client.get("/redoc").status_code == 404


def test_no_page_draws_maps():
    # plotly's only network loads are for map / geo traces (tiles, fonts, topojson): no page draws one
    scripts = "\n".join(f.read_text() for f in sorted(STATIC.glob("*.js")))
    traces = set(re.findall(r'type:\s*"([a-z_]+)"', scripts))
    assert traces and not traces & {"scattergeo", "choropleth", "scattermap", "scattermapbox", "choroplethmap",
                                     "choroplethmapbox", "densitymap", "densitymapbox"}, traces
