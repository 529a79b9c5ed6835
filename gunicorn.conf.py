"""gunicorn's settings file, read from the working directory it starts in (the image's /app; the checkout for
`bench/upload_latency.py`). The command line sets the rest (Dockerfile, docker-compose.yml): only hooks here."""


def post_worker_init(worker) -> None:  # gunicorn's Worker
    """Once a worker has loaded the app (config/wsgi.py, which rehearsed an upload's answer on its main thread and
    closed that connection): the same rehearsal on each thread that serves its requests, whose database connection
    (and bell's) it opens and keeps, so that no thread's first request opens one (ingest.services.rehearsal).
    The threaded worker's request threads (gunicorn's --threads); a sync worker's own thread. Other workers
    (gevent, ASGI) serve elsewhere than this thread: nothing is rehearsed there. Never raises: a hook that raises
    fails the worker's boot, and gunicorn then stops altogether."""
    try:
        from gunicorn.workers.gthread import ThreadWorker
        from gunicorn.workers.sync import SyncWorker

        from ingest.services import rehearsal

        if isinstance(worker, ThreadWorker):
            went = rehearsal.request_threads_rehearsal(worker.tpool.submit, worker.cfg.threads)
            worker.log.info("the request threads rehearsed an upload's answer: %d of %d", went, worker.cfg.threads)
        elif type(worker) is SyncWorker:
            rehearsal.answer_rehearsal(serving=True)
    except Exception:
        worker.log.exception("the rehearsal of an upload's answer on the request threads failed")
