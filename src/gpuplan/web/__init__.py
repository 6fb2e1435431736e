"""`gpuplan web`: a local web app and HTTP API over `gpuplan.api` (optional extra `web`: FastAPI,
uvicorn, plotly). `create_app(host, port)` builds the app; docs/web.md describes it."""
