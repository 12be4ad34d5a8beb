"""``/docs`` served from packaged assets.

FastAPI's default docs page loads Swagger UI from a CDN, which an offline user (this
project's default) sees as a blank page. The assets come instead from the
``swagger-ui-bundle`` package (the ``server`` extra), mounted under :data:`ASSETS`.
ReDoc has no packaged bundle, so ``/redoc`` is not served.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS", "DOCS", "OAUTH2_REDIRECT", "install_docs"]

DOCS = "/docs"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"
ASSETS = "/docs-assets"


def install_docs(app: FastAPI) -> None:
    """Swagger UI at ``/docs`` over ``app``'s OpenAPI schema, every asset from this server.
    ``app`` must be built with ``docs_url=None, redoc_url=None``."""
    from swagger_ui_bundle import swagger_ui_path

    app.mount(ASSETS, StaticFiles(directory=swagger_ui_path), name="docs-assets")

    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} API",
                                   swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
                                   oauth2_redirect_url=OAUTH2_REDIRECT)

    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    app.add_api_route(DOCS, docs, include_in_schema=False)
    app.add_api_route(OAUTH2_REDIRECT, oauth2_redirect, include_in_schema=False)
