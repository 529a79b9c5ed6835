"""Where one verification task's time goes: the task body (submission_verify) under cProfile, in-process,
on a fresh SQLite database, with the 10-log bundle bench/upload_latency.py uploads.

    .venv/bin/python bench/profile_verify_task.py [--repeat 5] [--top 40] [--sort cumulative]
Prints the wall time of each task (the first includes what the worker would have preloaded) and the profile
of the last ones.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="cumulative")
    parser.add_argument("--dump", default=None, help="write the raw profile here")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="podium-profile-task-"))
    os.environ.update(
        {
            "PODIUM_VAR_DIR": str(tmp / "var"),
            "DATABASE_URL": f"sqlite:///{tmp}/p.sqlite3",
            "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
        }
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", "-v0")
    sys.path.insert(0, str(ROOT / "bench"))
    import upload_latency

    setup_globals: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(upload_latency.SETUP, setup_globals)  # the bench's own setup code
    from accounts.models import Organization
    from catalog.models import Round
    from ingest.engine import tool
    from ingest.services import submissions

    tool.preload()  # as the worker does before it forks
    submissions.enqueue = lambda submission_id: None  # the task is called here, not through the broker
    user = setup_globals["user"]
    org, round_ = Organization.objects.get(slug="larkspur-compute"), Round.objects.get(slug="bench-v4.0")
    made = upload_latency.bundles(args.repeat, tmp)
    profile = cProfile.Profile()
    times = []
    for i, data in enumerate(made):
        archive = tmp / f"b{i}.tar.gz"
        archive.write_bytes(data)
        outcome = submissions.submission_upload(
            actor=user, organization=org, round=round_, archive=archive, original_name="bundle.tar.gz"
        )
        start = time.perf_counter()
        if i:
            profile.enable()
        state = submissions.submission_verify(submission_id=outcome.submission.pk)
        if i:
            profile.disable()
        times.append(time.perf_counter() - start)
        assert state == "verified", state
    print("task wall times (s): " + " ".join(f"{t:.3f}" for t in times))
    if args.dump:
        profile.dump_stats(args.dump)
    pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
