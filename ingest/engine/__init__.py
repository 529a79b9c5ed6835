"""Verification engine: pure Python around the pinned mlperf-logging package.

Nothing here imports Django, so the same code serves the importer, the Celery worker, the
command-line client and tests. Entry point: `verify.verify_item`.
"""
