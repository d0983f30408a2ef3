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
#
# Two stages: the slim image has no C compiler, so the wheel (with the C runtime,
# engine/sim/_native/core.c) is built in a stage that has one, and only the wheel moves on.
# tests/test_build.py checks this file's shape; tools/check_build.sh builds the same wheel.

FROM python:3.11-slim AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
# Chromium renders the figure exports (kaleido, app/figures.py).
RUN apt-get update && apt-get install -y --no-install-recommends chromium \
    && rm -rf /var/lib/apt/lists/*
ENV BROWSER_PATH=/usr/bin/chromium
COPY --from=build /wheels /wheels
COPY constraints.txt /tmp/constraints.txt
RUN pip install --no-cache-dir -c /tmp/constraints.txt /wheels/*.whl \
    && rm -rf /wheels /tmp/constraints.txt
# Refuse to build an image that would run the 20-100x slower pure-Python runtime.
RUN python -c "from engine.sim import native; import sys; print(native.backend_description()); sys.exit(not native.available())"

# The published report (docs/landscapes.json) for the dashboard's /published page.
COPY --from=build /src/docs/landscapes.json /usr/local/share/dtr-landscape/landscapes.json

VOLUME ["/traces", "/data"]
ENV DTR_LANDSCAPE_TRACES=/traces \
    DTR_LANDSCAPE_DB=/data/landscape.duckdb \
    DTR_LANDSCAPE_REPORT=/usr/local/share/dtr-landscape/landscapes.json

EXPOSE 8050
CMD ["dtr-landscape", "serve", "--host", "0.0.0.0"]
