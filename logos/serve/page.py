"""The web page: one HTML file, its scripts and its style, and the libraries it uses,
shipped in the package (no build step, no CDN: it works offline). They hold no data, so they
are the only routes served without the token; the page reads the token from its URL's
fragment (never sent to the server, never in a log), keeps it in sessionStorage and sends it
as a bearer header with every API request.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

PAGE_FILES: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/page.js": ("page.js", "text/javascript; charset=utf-8"),
    "/page.css": ("page.css", "text/css; charset=utf-8"),
    "/projects.js": ("projects.js", "text/javascript; charset=utf-8"),
    "/changes.js": ("changes.js", "text/javascript; charset=utf-8"),
    "/markdown.js": ("markdown.js", "text/javascript; charset=utf-8"),
    # Vendored unchanged, each with its LICENSE (no CDN: the page works offline):
    # uPlot (MIT), the batch report's charts; markdown-it (MIT) renders replies, with raw HTML
    # off; DOMPurify (Apache-2.0) sanitises what it renders once more.
    "/vendor/uPlot.iife.min.js": ("vendor/uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    "/vendor/uPlot.min.css": ("vendor/uPlot.min.css", "text/css; charset=utf-8"),
    "/vendor/markdown-it.min.js": ("vendor/markdown-it.min.js", "text/javascript; charset=utf-8"),
    "/vendor/purify.min.js": ("vendor/purify.min.js", "text/javascript; charset=utf-8"),
}
"""Route → (file in logos/serve/static, media type)."""

_SECURITY_HEADERS = {
    # WHY: only our own script and style, no inline code, no frames, no other origin.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


@cache
def _file(name: str) -> bytes:
    return resources.files("logos.serve").joinpath("static", *name.split("/")).read_bytes()


async def page_response(request: Request) -> Response:
    name, media_type = PAGE_FILES[request.url.path]
    return Response(_file(name), media_type=media_type, headers=_SECURITY_HEADERS)
