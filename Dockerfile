# Parallelism Lab for class hosting: `docker build -t parallelism-lab .` then
# `docker run -p 8000:8000 parallelism-lab`. tests/test_dockerfile.py mirrors these steps
# outside Docker (no engine on the build machines) and lints this file with hadolint.

# Front-end assets, pinned by static/vendor/package-lock.json (Node 22: maintenance LTS), and
# the partial plotly.js bundle built from them (static/vendor/build.mjs, as `make assets`).
FROM node:22-bookworm-slim AS assets
WORKDIR /assets
COPY static/vendor/package.json static/vendor/package-lock.json static/vendor/build.mjs static/vendor/plotly-bundle.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund && node build.mjs

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/lab
# The app's pins, hash-checked: the same file `make run` installs (refresh: `make lock`).
COPY requirements.lock ./
# data/: the live class's SQLite file (DATA_DIR, app/classroom/db.py), the app user's own;
# mount a volume there to keep classes across containers, or set DATABASE_URL (compose.yaml).
RUN pip install --no-cache-dir --require-hashes -r requirements.lock && useradd --system --uid 10001 --no-create-home lab && mkdir -p data && chown 10001 data
COPY app ./app
COPY labs ./labs
COPY templates ./templates
COPY static ./static
# What the app serves (app/assets.py), not the sources the bundle was built from.
COPY --from=assets /assets/node_modules/.lab ./static/vendor/node_modules/.lab
COPY --from=assets /assets/node_modules/htmx.org/dist ./static/vendor/node_modules/htmx.org/dist
COPY --from=assets /assets/node_modules/swagger-ui-dist ./static/vendor/node_modules/swagger-ui-dist
COPY --from=assets /assets/node_modules/redoc/bundles ./static/vendor/node_modules/redoc/bundles
USER 10001
# One worker: its render processes (app/render_pool.py) draw lab answers on every core;
# `python -m app` bounds every request (app/limits.py; docs/settings.md, "Limits on every request").
ENV HOST=0.0.0.0 PORT=8000 WORKERS=1 RENDER_PROCESSES=2 RENDER_TIMEOUT=10 CLIENT_TIMEOUT=10 DATA_DIR=data
EXPOSE 8000
# Reads $PORT at check time, so `docker run -e PORT=9000` stays healthy.
HEALTHCHECK --interval=30s --timeout=3s CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8000'), timeout=2)"]
# From WORKDIR, `python -m app` imports the copied app/ and labs/ (no package install needed).
CMD ["python", "-m", "app"]
