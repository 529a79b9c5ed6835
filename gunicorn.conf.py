"""gunicorn's settings file, read from the working directory it starts in (the image's /app; the checkout for
`bench/upload_latency.py`). The command line sets the rest (Dockerfile, docker-compose.yml): only hooks here."""


def post_worker_init(worker) -> None:  # gunicorn's Worker
    """Once a worker has loaded the app (config/wsgi.py, which rehearsed an upload's answer on its main thread and
    closed that connection): the same rehearsal on each request thread, whose database connection (and bell's) it
    opens and keeps, so that no thread's first request opens one (ingest.services.rehearsal). A sync worker serves
    its requests on this thread, so it rehearses here."""
    from ingest.services import rehearsal

    pool = getattr(worker, "tpool", None)  # the gthread worker's request threads (gunicorn's --threads)
    if pool is None:
        rehearsal.answer_rehearsal(serving=True)
        return
    went = rehearsal.request_threads_rehearsal(pool.submit, worker.cfg.threads)
    worker.log.info("the request threads rehearsed an upload's answer: %d of %d", went, worker.cfg.threads)
