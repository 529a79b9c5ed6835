"""The compliance checker's rule code, compiled once per process instead of once per log line.

mlperf-logging's compliance checker (mlp_compliance) runs the rules of its YAML files by handing their text to
the builtins `eval` (CHECK, FIRST_CHECK, ATLEAST_ONE_CHECK, END checks) and `exec` (BEGIN, PRE, POST code) for
every log line a rule applies to. Given a string, both compile it first: Python compiled the same few hundred
rule texts again for every line, more than half of the checker's time (the MLCommons corpus's 259 logs: 1.55 s
of compliance checks, 0.70 s with each text compiled once, the same outcomes; the bench's 10-log bundle:
3.5 -> 1.1 ms a log).

`CompiledOnce` stands in for `eval` or `exec` inside that module only (a module global shadows the builtin for the
module's own code; tool installs it on import, as it installs its other stand-ins). A rule's text is compiled the
way `eval`/`exec` compile a string called from that module (the file name "<string>", the module's `__future__`
flags, nothing inherited from here, eval's leading blanks skipped), the code object is kept under the exact text,
and the builtin runs it with the same globals and locals: what the rule computes, raises or fails to compile is
what it did before, and a text that does not compile is not kept (it raises each time, as before). The texts come
from the library's rule files and Podium's own (catalog extensions), never from a submitter; logs only reach them
as the values the code reads.
"""

from __future__ import annotations
import __future__

import builtins
import contextlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

# Rule texts kept per process and stand-in; the library's rules for every ruleset are well under a thousand.
MAX_KEPT = 20_000


class CompiledOnce:
    """`eval` or `exec` (`mode`) for one module, compiling each distinct source string once."""

    def __init__(self, builtin: Any, mode: str, flags: int) -> None:
        self.builtin = builtin
        self.mode = mode
        self.flags = flags
        self.codes: dict[str, Any] = {}
        self.compiled = 0  # how many texts were compiled (tests read it)

    def __call__(self, source: Any, globals: Any = None, locals: Any = None, /) -> Any:
        if type(source) is not str:
            return self.builtin(source, *_scopes(globals, locals))
        return self.builtin(self.code(source), *_scopes(globals, locals))

    def code(self, source: str) -> Any:
        """`source` compiled as the builtin compiles it, kept (a text that does not compile raises, each time)."""
        code = self.codes.get(source)
        if code is None:
            # eval of a string skips its leading spaces and tabs before compiling it; exec does not.
            text = source.lstrip(" \t") if self.mode == "eval" else source
            code = compile(text, "<string>", self.mode, self.flags, True)
            self.compiled += 1
            if len(self.codes) < MAX_KEPT:
                self.codes[source] = code
        return code


def _scopes(globals: Any, locals: Any) -> tuple[Any, Any]:
    """The scopes the builtin would use: without globals, the caller's (two frames up: past `__call__`)."""
    if globals is None:
        caller = sys._getframe(2)
        return caller.f_globals, caller.f_locals if locals is None else locals
    return globals, locals


def future_flags(module: ModuleType) -> int:
    """The compiler flags of the `__future__` features `module` imports, which `eval` or `exec` of a string
    called from its code would inherit."""
    flags = 0
    for value in vars(module).values():
        if isinstance(value, __future__._Feature):
            flags |= value.compiler_flag
    return flags


# Where the compliance checker's rule files hold code, and what it hands that code to (mlp_compliance.
# configured_checks and run_check_*: each text stripped, a list of them for CHECK).
_EVALUATED = frozenset({"CHECK", "FIRST_CHECK", "ATLEAST_ONE_CHECK"})
_EXECUTED = frozenset({"CODE", "PRE", "POST"})


def compile_ahead(module: ModuleType, rules: Any) -> int:
    """Compile the code of a parsed rule file into `module`'s stand-ins now, as the checker will hand it to
    them: when a process parses its rule files before it forks its checker children (tool.preload_rules),
    the children start with the code compiled too, rather than each compiling it again for its first log.
    A text that does not compile is left for the checker to meet, which reports it as before. Returns how
    many texts were compiled here."""
    evaluate, run = vars(module).get("eval"), vars(module).get("exec")
    if not (isinstance(evaluate, CompiledOnce) and isinstance(run, CompiledOnce)):
        return 0
    before = evaluate.compiled + run.compiled
    pending = [rules]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                stand_in = evaluate if key in _EVALUATED else run if key in _EXECUTED else None
                texts = value if isinstance(value, list) else [value]
                if stand_in is not None and all(isinstance(text, str) for text in texts):
                    for text in texts:
                        with contextlib.suppress(SyntaxError, ValueError):
                            stand_in.code(text.strip())
                else:
                    pending.append(value)
    return evaluate.compiled + run.compiled - before


def install(module: ModuleType) -> None:
    """`eval` and `exec` of `module`'s code compile each text once from now on (twice: no change)."""
    flags = future_flags(module)
    for name, mode in (("eval", "eval"), ("exec", "exec")):
        if not isinstance(getattr(module, name, None), CompiledOnce):
            setattr(module, name, CompiledOnce(getattr(builtins, name), mode, flags))


@contextlib.contextmanager
def uninstalled(module: ModuleType) -> Iterator[None]:
    """The builtins again within the block, then the same stand-ins with what they compiled (the bench times
    the library as shipped beside the checkers as Podium runs them; tests compare the two)."""
    kept = {name: vars(module)[name] for name in ("eval", "exec")
            if isinstance(vars(module).get(name), CompiledOnce)}
    for name in kept:
        delattr(module, name)
    try:
        yield
    finally:
        for name, stand_in in kept.items():
            setattr(module, name, stand_in)
