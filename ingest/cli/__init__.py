"""Podium's command-line client: check a results bundle locally, or submit it to a Podium server.

    python -m ingest.cli check PATH [--ruleset X.Y.Z] [--json]
    python -m ingest.cli submit --server URL [--token TOKEN] --round ROUND_SLUG PATH [--no-wait]
                                [--timeout SECONDS] [--json]

It imports no Django: `check` runs the verification engine (`ingest.engine`) in this process, and
`submit` speaks the server's HTTP API with the standard library only, so a submitter needs no
server-side settings to use it.
"""

from ingest.cli.main import main

__all__ = ["main"]
