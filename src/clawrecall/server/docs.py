"""`/docs` (Swagger UI) and `/redoc`, served whole from this server: their scripts and styles come from the
`fastapi-offline` package, so the pages work offline and load nothing from anyone else's host.

FastAPI's own pages fetch Swagger UI from a CDN, and Swagger UI would ask validator.swagger.io to
check the schema: both are turned off.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from .middleware import PUBLIC_PREFIX

ASSETS = PUBLIC_PREFIX.rstrip("/")


def install_docs(app: FastAPI) -> None:
    """Mount the pages and their assets on an app created with `docs_url=None, redoc_url=None`."""
    app.mount(ASSETS, StaticFiles(directory=str(files("fastapi_offline") / "static")), name="docs-assets")
    title = f"{app.title} API"

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json", title=title, oauth2_redirect_url="/docs/oauth2-redirect",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png", swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json", title=title, redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png", with_google_fonts=False,
        )
