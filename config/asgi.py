import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_asgi_application()

# As in config.wsgi: what a killed web process left goes when one starts.
from ingest.cleanup import litter_sweep_at_start  # noqa: E402 - needs the apps loaded above

litter_sweep_at_start(reason="web start")
