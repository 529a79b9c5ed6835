# Production image for web, worker and beat (see docker-compose.yml and docs/operating.md).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq5 \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 1000 podium
WORKDIR /app

# Everything but what .dockerignore leaves out: no list of packages to forget one from.
COPY . .
# compileall: the processes run from these sources (/app comes first on their path), and PYTHONDONTWRITEBYTECODE
# keeps them from caching what they compile, so without bytecode made here every start (a gunicorn or Celery
# process, each manage.py command) compiles Podium's ~115 modules again: ~0.2 s of CPU (bench/import_corpus.py).
RUN pip install . \
    && python -m compileall -q /app \
    && PODIUM_VAR_DIR=/tmp/build-var python manage.py collectstatic --noinput \
    && mkdir -p /var/lib/podium && chown podium:podium /var/lib/podium

USER podium
ENV PODIUM_VAR_DIR=/var/lib/podium
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4", "--timeout", "60"]
