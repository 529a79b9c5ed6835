# Production image for web, worker and beat (see docker-compose.yml).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq5 \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 1000 podium
WORKDIR /app

COPY pyproject.toml README.md ./
COPY config config
COPY leaderboard leaderboard
COPY ingest ingest
COPY reviews reviews
COPY runners runners
COPY templates templates
COPY static static
COPY manage.py ./
RUN pip install . && python manage.py collectstatic --noinput

USER podium
EXPOSE 8000
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "60"]
