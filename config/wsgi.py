import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# What a killed web process left (upload temp files, scratch folders, half-stored bundles) goes when one
# starts; only what is older than PODIUM_LITTER_MAX_AGE, so the other web processes lose nothing.
from ingest.cleanup import litter_sweep_at_start  # noqa: E402 - needs the apps loaded above

litter_sweep_at_start(reason="web start")
