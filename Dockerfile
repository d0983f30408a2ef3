# The dashboard and the engine in one image. Mount the DTR logs at /traces and a folder
# for the store at /data:
#   docker build -t dtr-landscape .
#   docker run -p 8050:8050 -v "$PWD/logs:/traces:ro" -v dtr-data:/data \
#     -e DTR_LANDSCAPE_TOKEN=<a secret> dtr-landscape
# Exposure: the server below binds 0.0.0.0 with no accounts and no TLS, so anyone who
# reaches the port can read the dashboard. Set DTR_LANDSCAPE_TOKEN so that launching and
# cancelling jobs need it; DTR_LANDSCAPE_MAX_QUEUED (default 20) bounds the waiting jobs.
# Beyond a trusted network, publish on loopback (-p 127.0.0.1:8050:8050) behind a proxy
# with TLS and authentication (README.md, "Security and exposure").
FROM python:3.11-slim

WORKDIR /srv/dtr-landscape
COPY . .
RUN pip install --no-cache-dir -c constraints.txt .

VOLUME ["/traces", "/data"]
ENV DTR_LANDSCAPE_TRACES=/traces \
    DTR_LANDSCAPE_DB=/data/landscape.duckdb

EXPOSE 8050
CMD ["dtr-landscape", "serve", "--host", "0.0.0.0"]
