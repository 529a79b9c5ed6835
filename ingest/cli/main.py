"""Arguments and exit statuses of `python -m ingest.cli`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ingest.cli.common import CliError

EXIT_STATUSES = """\
exit status:
  0  every item verified (submit --no-wait: the upload was accepted)
  1  at least one item is noncompliant
  2  usage or input error, HTTP or client error, refused upload, timeout
  3  the server could not verify the bundle (its fault, not a verdict)
"""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("the timeout must be more than 0 seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ingest.cli",
        description="Check MLPerf Training results locally, or submit them to a Podium server.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser(
        "check", help="verify results locally, as the server would",
        description="Run the server's verification locally: the mlperf-logging checkers, the run count, "
                    "seeds, RCPs and the olympic score, per (system, benchmark).",
        epilog=EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("path", type=Path, metavar="PATH",
                       help="a submitter folder, a round folder of them, or a .tar.gz/.tgz/.zip of one submitter "
                            "folder")
    check.add_argument("--ruleset", metavar="X.Y.Z",
                       help="mlperf-logging ruleset (default: from a training_results_vX.Y folder in PATH)")
    check.add_argument("--json", action="store_true", dest="as_json", help="print one JSON document instead")

    submit = commands.add_parser(
        "submit", help="upload a bundle to a Podium server and wait for its verdict",
        description="Upload a submitter folder (packed as a .tar.gz) or an archive of one, then wait for "
                    "the server's verdict.",
        epilog=EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    submit.add_argument("--server", required=True, metavar="URL", help="the Podium server, e.g. https://podium.example")
    submit.add_argument("--token", metavar="TOKEN",
                        help="API token (default: $PODIUM_TOKEN, which is better: a command line is visible "
                             "to other users of the machine)")
    submit.add_argument("--round", required=True, dest="round_slug", metavar="ROUND_SLUG",
                        help="the round to submit to, by its slug")
    submit.add_argument("path", type=Path, metavar="PATH",
                        help="a submitter folder, or a .tar.gz/.tgz/.zip of one (sent as it is)")
    submit.add_argument("--no-wait", action="store_false", dest="wait",
                        help="return once the upload is accepted, without waiting for the verdict")
    submit.add_argument("--timeout", type=_seconds, default=600.0, metavar="SECONDS",
                        help="give up retrying and waiting after this long (default: 600)")
    submit.add_argument("--json", action="store_true", dest="as_json", help="print one JSON document instead")
    submit.add_argument("--organization", metavar="SLUG", default="",
                        help="the organization to submit for, if you may submit for several")
    submit.add_argument("--make-current", action="store_true",
                        help="if these bytes were uploaded before and a later upload replaced them, upload them "
                             "again as the newest upload (verified again; their results become current)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "check":
            from ingest.cli.check import run_check

            return run_check(args.path, ruleset=args.ruleset, as_json=args.as_json)
        from ingest.cli.submit import run_submit

        return run_submit(server=args.server, token=args.token, round_slug=args.round_slug, path=args.path,
                          wait=args.wait, timeout=args.timeout, as_json=args.as_json,
                          make_current=args.make_current, organization=args.organization)
    except CliError as exc:
        print(f"podium: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("podium: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (head, a closed pager) stopped listening; stdout is pointed at /dev/null so that
        # the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
