# The dashboard and the engine in one image. Mount the DTR logs at /traces and a folder
# for the store at /data:
#   docker build -t dtr-landscape .
#   docker run -p 8050:8050 -v "$PWD/logs:/traces:ro" -v dtr-data:/data dtr-landscape
FROM python:3.11-slim

# Chromium renders the figure exports (kaleido, app/figures.py).
RUN apt-get update && apt-get install -y --no-install-recommends chromium \
    && rm -rf /var/lib/apt/lists/*
ENV BROWSER_PATH=/usr/bin/chromium

WORKDIR /srv/dtr-landscape
COPY . .
RUN pip install --no-cache-dir -c constraints.txt .

VOLUME ["/traces", "/data"]
ENV DTR_LANDSCAPE_TRACES=/traces \
    DTR_LANDSCAPE_DB=/data/landscape.duckdb

EXPOSE 8050
CMD ["dtr-landscape", "serve", "--host", "0.0.0.0"]
