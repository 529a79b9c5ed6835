import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# What a killed web process left (upload temp files, scratch folders, half-stored bundles) goes when one
# starts; only what is older than PODIUM_LITTER_MAX_AGE, so the other web processes lose nothing.
from ingest.cleanup import litter_sweep_at_start  # noqa: E402 - needs the apps loaded above

litter_sweep_at_start(reason="web start")

# Load the URLconf (and with it every view module, DRF and the API schema's serializers) now rather than
# in the first request: a fresh worker's first visitor, or the first upload after a deploy, otherwise
# waits for those imports (0.2 s measured by bench/upload_latency.py), and for the URL patterns compiled for
# reversing (another ~45 ms, core.warmup).
from django.urls import get_resolver  # noqa: E402

from core.release import release  # noqa: E402
from core.warmup import (  # noqa: E402
    broker_connect_soon,
    first_request_warm,
    heap_freeze,
    task_sending_warm,
    url_reversing_warm,
)

get_resolver().url_patterns  # noqa: B018 - evaluating it imports the views
url_reversing_warm()
task_sending_warm()
first_request_warm()
# The reads of an upload's request that waits for its verdict, rehearsed (a made-up uploader, rolled back): each is a
# statement built once per process. Its connection is closed: this thread serves no request.
from django.db import connections  # noqa: E402

from ingest.services.rehearsal import answer_rehearsal  # noqa: E402

answer_rehearsal()
connections.close_all()
release()  # the source's digest every cached answer's key holds (~10 ms of reading files)
# Last: what was built above lives as long as the process; a full collection in the middle of a request walked
# all of it (60-80 ms, bench/profile_api.py) and now walks only what requests made since (core.warmup).
heap_freeze(collect=True)
# Last, and in a thread: nothing above waits for the broker.
broker_connect_soon()
