"""What a fresh process would otherwise build during its first request or task, built when it starts.

Why: Django compiles the URL patterns for reversing (`reverse`, `get_absolute_url`, `{% url %}`) on the first
reverse in each namespace, per process: about 45 ms of regular expressions, paid by a fresh web worker's first
visitor (the first upload after a deploy among them) and by each verification worker's first notification.
Loading the URLconf (config/wsgi.py) imports the views but compiles none of this.
"""

from __future__ import annotations

from django.urls import NoReverseMatch, URLResolver, get_resolver, reverse

# A name no pattern has: reversing it in a namespace compiles that namespace's patterns and then fails.
_NO_SUCH_NAME = "podium-warm-up-no-such-name"


def url_reversing_warm() -> int:
    """Compile every namespace's patterns for reversing now; returns how many namespaces (the root included)."""
    resolver = get_resolver()
    resolver.reverse_dict  # noqa: B018 - the root's patterns and those included without a namespace
    warmed = 1
    for path in _namespaces(resolver, ()):
        try:
            reverse(":".join((*path, _NO_SUCH_NAME)))
        except NoReverseMatch:
            warmed += 1  # expected: the patterns were compiled looking for it
    return warmed


def _namespaces(resolver: URLResolver, above: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = []
    for namespace, (_, included) in resolver.namespace_dict.items():
        path = (*above, namespace)
        found.append(path)
        found.extend(_namespaces(included, path))
    return found
