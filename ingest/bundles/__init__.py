"""Receiving an uploaded result bundle safely: refuse anything hostile at once, with a message
that tells the submitter what to fix, and leave nothing behind on a refusal.

A bundle is a .tar.gz or .zip of one submitter folder in the MLCommons layout, or the system
JSON and result logs chosen one by one on a form (`pack_loose_files` turns those into the same
canonical .tar.gz); `read_member` reads one file back out of a stored bundle. Pure Python, no
Django: the CLI and the runner agent use it too.
"""

from ingest.bundles.extract import extract_bundle
from ingest.bundles.formats import read_member
from ingest.bundles.limits import BundleRejected, Limits
from ingest.bundles.loose import LooseFile, canonical_tar_gz, pack_loose_files, sha256_of

__all__ = [
    "BundleRejected",
    "Limits",
    "LooseFile",
    "canonical_tar_gz",
    "extract_bundle",
    "pack_loose_files",
    "read_member",
    "sha256_of",
]
