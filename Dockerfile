# reviewer-app in a small image: `reviewer-app serve` as an unprivileged user, all state in the /data volume.
#   docker build -t reviewer-app .
#   docker run --stop-timeout 30 -v reviewer-data:/data -p 8080:8080 -e ANTHROPIC_API_KEY=... reviewer-app
# With no GitHub App configured yet, the server starts its setup page (see docs/setup.md). --stop-timeout: on SIGTERM
# running reviews get 20 s (REVIEWER_SHUTDOWN_GRACE_SECONDS) to finish; Docker's default 10 s is shorter.
# Backups inside the image (no sqlite3 program here): docker exec CONTAINER reviewer-app backup /data/backup.db

# Both stages start from the same exact Python release (bump the two tags together, as a reviewed change).
# Build stage: install the locked dependencies, then the package itself, into /install.
FROM python:3.11.15-slim-trixie AS build
WORKDIR /src
# Every third-party file comes from the lock files and must match its hash (pip's --require-hashes): a package
# swapped or re-uploaded on the index fails the build. docs/operations.md says how to refresh them.
COPY requirements.lock requirements-build.lock ./
RUN pip install --no-cache-dir --disable-pip-version-check --require-hashes -r requirements-build.lock \
    && pip install --no-cache-dir --disable-pip-version-check --require-hashes --prefix=/install -r requirements.lock
COPY pyproject.toml README.md app-manifest.yml ./
COPY reviewer_app ./reviewer_app
# The package alone: built with the locked setuptools above, its dependencies already in place, nothing downloaded.
RUN pip install --no-cache-dir --disable-pip-version-check --no-index --no-deps --no-build-isolation --prefix=/install .

# Runtime stage: the installed packages only, no build tools, no sources.
FROM python:3.11.15-slim-trixie
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATABASE_URL=sqlite:////data/reviewer.db \
    REVIEWER_ENV_FILE=/data/.env
RUN groupadd --system --gid 10001 reviewer \
    && useradd --system --uid 10001 --gid reviewer --home-dir /data --no-create-home --shell /usr/sbin/nologin reviewer \
    && mkdir -p /data \
    && chown reviewer:reviewer /data \
    && chmod 0700 /data
COPY --from=build /install /usr/local
USER reviewer
WORKDIR /data
# The job database and the .env file the setup page writes (mode 0600) live here: keep it on a volume.
VOLUME ["/data"]
EXPOSE 8080
# No curl in the image: Python's urllib asks /healthz, and any error or non-2xx answer marks it unhealthy.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8080'), timeout=4)"]
CMD ["reviewer-app", "serve"]
