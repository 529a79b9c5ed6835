"""Is a runner's accelerator the one a system description names?

System descriptions use MLPerf's names ("NVIDIA H100-SXM5-80GB"), runners report nvidia-smi's
("NVIDIA H100 80GB HBM3"). They agree on the model ("H100"), and where both give it, on the memory
size; a PCIe or NVL card is another product than its SXM sibling, so either both names say so or
neither does. Anything else in the names (vendor, memory type, form-factor spelling) is ignored.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Z0-9]+")
_MEMORY = re.compile(r"(?<![A-Z0-9])(\d+)\s*GB(?![A-Z0-9])")
_NOT_A_MODEL = re.compile(r"\d+GB|SXM\d*|HBM\d*E?|PCIE|NVL|GEN\d+|\d+")
_VARIANTS = ("PCIE", "NVL")


def _tokens(name: str) -> list[str]:
    return _TOKEN.findall(name.upper())


def model_of(name: str) -> str | None:
    """The model token: the first one mixing letters and digits that is not a size or form factor."""
    for token in _tokens(name):
        if re.search(r"[A-Z]", token) and re.search(r"\d", token) and not _NOT_A_MODEL.fullmatch(token):
            return token
    return None


def _memory_gb(name: str) -> str | None:
    found = _MEMORY.search(name.upper())
    return found.group(1) if found else None


def same_accelerator(system: str, runner: str) -> bool:
    if not system.strip() or not runner.strip():
        return False
    model = model_of(system)
    if model is None:  # no recognizable model: fall back to the names themselves
        return system.strip().lower() in runner.strip().lower()
    if model != model_of(runner):
        return False
    memory, runner_memory = _memory_gb(system), _memory_gb(runner)
    if memory and runner_memory and memory != runner_memory:
        return False
    system_tokens, runner_tokens = set(_tokens(system)), set(_tokens(runner))
    return all((variant in system_tokens) == (variant in runner_tokens) for variant in _VARIANTS)
