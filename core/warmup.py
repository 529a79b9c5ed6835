"""What a fresh process would otherwise build during its first request or task, built when it starts.

Why: Django compiles the URL patterns for reversing (`reverse`, `get_absolute_url`, `{% url %}`) on the first
reverse in each namespace, per process: about 45 ms of regular expressions, paid by a fresh web worker's first
visitor (the first upload after a deploy among them) and by each verification worker's first notification.
Loading the URLconf (config/wsgi.py) imports the views but compiles none of this.
Likewise what Celery builds the first time a process sends a task: the broker's transport (kombu's Redis
transport and the redis client, ~115 ms of imports), the task registry (~25 ms) and the result backend (~12 ms,
looking up entry points): a fresh web worker's first upload paid them.
And what a web process's first request still met for the first time (bench: a fresh process's first upload
took ~2x a later one, 83-106 vs 37-57 ms): the classes the session and message middleware name in settings, the
caches, Celery's event dispatcher (each send builds one), and the broker's connection with the task queue's
declaration (13-16 ms), made in a thread at start (first_request_warm, broker_connect_soon).
Once all that is built, it is frozen out of the garbage collector's walks (heap_freeze).
"""

from __future__ import annotations

import codecs
import gc
import logging
import sys
import threading
from typing import Any

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


def task_sending_warm() -> bool:
    """Import the broker's transport now, without connecting (a broker that is down at start must not stop the
    web process; the connection is made, per process, on the first send). Returns whether there was one to
    import: with no broker, tasks run in-process and send nothing."""
    from celery import current_app

    if current_app.conf.task_always_eager:
        return False
    current_app.connection_for_write().transport  # noqa: B018 - resolving the transport class imports it
    current_app.tasks  # noqa: B018 - finalizes the app: every task registered
    current_app.backend  # noqa: B018 - none is configured (CELERY_RESULT_BACKEND), but finding that out costs
    current_app.events.Dispatcher  # noqa: B018 - each send builds a (disabled) event dispatcher: imports celery.events
    return True


def first_request_warm() -> None:
    """Import and build now what a web process's first request did: the session serializer and the message
    storage that settings name (imported by name on first use), every configured cache, the codec uploads
    are read with, and each database backend's SQL compilers (imported by name on the first query: ~1 ms of
    the first upload's request, bench/upload_latency.py's first upload; no connection is made)."""
    from django.conf import settings
    from django.core.cache import caches
    from django.db import connections
    from django.utils.module_loading import import_string

    import_string(settings.SESSION_SERIALIZER)
    import_string(settings.MESSAGE_STORAGE)
    for alias in settings.CACHES:
        caches[alias]  # the backend is made (and its module imported) on first access
    for alias in settings.DATABASES:
        connections[alias].ops.compiler("SQLCompiler")
    codecs.lookup("latin-1")  # logs are read as mlperf-logging reads them (ingest.engine.logparse)
    lazy_patterns_compile()


def lazy_patterns_compile() -> int:
    """Compile now every regular expression that a loaded module holds compiled lazily (Django's
    `_lazy_re_compile`), in its globals, its classes' attributes or its objects' (a validator's pattern): the
    request's host, a response's charset, a multipart form's boundary, the validators'. Each was compiled by the
    first request that met it (~0.9 ms of a first upload's request, in process, cProfile). Only those: no other
    lazy object is evaluated (a settings-dependent one may not be ready), and a module that cannot be read (a
    lazily loaded one) is left alone. How many it compiled."""
    from django.utils.functional import SimpleLazyObject

    compiled = 0
    for module in list(sys.modules.values()):
        try:
            # Not vars(module): a lazily loaded module's attribute access runs it.
            names = object.__getattribute__(module, "__dict__")
        except Exception:  # no namespace (a placeholder some packages put there)
            continue
        for value in list(names.values()):
            # Only type(value), never isinstance(value, ...): isinstance asks an object its __class__ where its type
            # is not the one asked for, which evaluates a lazy object (a storage, the settings) or warns of a
            # deprecated one.
            kind = type(value)
            if kind is SimpleLazyObject:
                compiled += _compiled(value)
            elif issubclass(kind, type) or kind.__module__ not in _NOT_HOLDERS:
                try:  # a class's attributes, or an object's (validate_slug's pattern)
                    held = object.__getattribute__(value, "__dict__")
                except Exception:  # an object without one
                    continue
                for inner in list(held.values()):
                    if type(inner) is SimpleLazyObject:
                        compiled += _compiled(inner)
    return compiled


def _compiled(lazy: Any) -> int:
    from django.utils.functional import empty

    state = object.__getattribute__(lazy, "__dict__")
    if state.get("_wrapped") is not empty or getattr(state.get("_setupfunc"), "__qualname__", "") != _LAZY_PATTERN:
        return 0
    try:
        lazy._setup()
    except Exception:  # a pattern that does not compile fails where it is used, as before
        return 0
    return 1


# Objects whose attributes hold no pattern of a module's: functions, modules, the builtins' own.
_NOT_HOLDERS = frozenset({"builtins", "types"})
_LAZY_PATTERN = "_lazy_re_compile.<locals>._compile"


def broker_connect_soon() -> threading.Thread | None:
    """Connect to the broker and declare the task queue now, in a thread, rather than in the first upload's
    request (13-16 ms of it). The connection goes back to Celery's producer pool, where the first publish
    takes it, and kombu remembers the queue as declared on it. In a thread of its own: a broker that is down or
    slow must not hold up the web process's start, and is not reported here (the first publish meets it as
    any publish does: core.broker). None where tasks run in-process."""
    from celery import current_app

    if current_app.conf.task_always_eager:
        return None
    thread = threading.Thread(target=_connect_to_broker, name="podium-broker-warm-up", daemon=True)
    thread.start()
    return thread


def _connect_to_broker() -> None:
    from celery import current_app
    from kombu.common import maybe_declare

    try:
        with current_app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=1)
            maybe_declare(current_app.amqp.queues[current_app.conf.task_default_queue], producer.channel)
    except Exception:  # the first publish connects, or fails and says why (core.broker)
        logging.getLogger(__name__).debug("no broker connection made at start", exc_info=True)


def _namespaces(resolver: URLResolver, above: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = []
    for namespace, (_, included) in resolver.namespace_dict.items():
        path = (*above, namespace)
        found.append(path)
        found.extend(_namespaces(included, path))
    return found


def heap_freeze(*, collect: bool) -> None:
    """Move every object this process holds now out of the garbage collector's sight (gc.freeze). Call it
    once what a process builds at its start is built: the modules, URL patterns, checkers and rule files that
    live as long as the process.

    Why: a full (oldest-generation) collection walks every tracked object. In a verification worker that heap
    is Django, scipy and the checkers: each full collection took 100-150 ms in the middle of a task
    (bench/profile_verify_task.py --spans, GC pauses), and in a web process 60-80 ms in the middle of a request
    (bench/profile_api.py); frozen, they take a few ms (what the process made since). In a forked child the
    walk also writes into every object's header, so the pages it shared with its parent are copied (13,000
    pages, 110 ms, in a checker child). `collect` first (a process that will not fork, or before it forks):
    garbage frozen is never freed; not in a child just forked, where collecting is what copies the pages.
    Freezing costs nothing: the collector's lists are spliced, no object is touched."""
    if collect:
        gc.collect()
    gc.freeze()
