# Parallelism Lab for class hosting: `docker build -t parallelism-lab .` then
# `docker run -p 8000:8000 parallelism-lab`. tests/test_dockerfile.py mirrors these steps
# outside Docker (no engine on the build machines) and lints this file with hadolint.

# Front-end assets, pinned by static/vendor/package-lock.json.
FROM node:20-bookworm-slim AS assets
WORKDIR /assets
COPY static/vendor/package.json static/vendor/package-lock.json ./
RUN npm ci --no-audit --no-fund

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/lab
COPY pyproject.toml README.md ./
COPY app ./app
COPY labs ./labs
COPY templates ./templates
COPY static ./static
COPY --from=assets /assets/node_modules ./static/vendor/node_modules
# Editable, so the app finds templates/ and static/ beside its package.
RUN pip install --no-cache-dir -e . && useradd --system --uid 10001 --no-create-home lab
USER 10001
ENV HOST=0.0.0.0 PORT=8000 WORKERS=2
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]
CMD ["python", "-m", "app"]
