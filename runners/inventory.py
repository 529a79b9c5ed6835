"""The hardware inventory an agent reports with each attempt, against the hardware its runner declared.

Agents send `nvidia-smi -q` as it prints (on a host without NVIDIA GPUs, a CPU inventory in the same
shape: `Attached GPUs : 0`). Podium reads the GPU count and each GPU's product name from it; an attempt
whose inventory disagrees with what its runner declared on the claim fails, and says why.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from runners.matching import same_accelerator

_ATTACHED = re.compile(r"^\s*Attached GPUs\s*:\s*(\d+)\s*$", re.MULTILINE)
_PRODUCT = re.compile(r"^\s*Product Name\s*:\s*(.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Inventory:
    count: int
    products: tuple[str, ...]


def parse_inventory(text: str) -> Inventory | None:
    """None when the text is no inventory at all (no `Attached GPUs` line)."""
    attached = _ATTACHED.search(text)
    if attached is None:
        return None
    return Inventory(count=int(attached.group(1)), products=tuple(_PRODUCT.findall(text)))


def hardware_problem(*, declared_model: str, declared_count: int, inventory_text: str) -> str:
    """Why the reported inventory is not the declared hardware, or ""."""
    inventory = parse_inventory(inventory_text)
    if inventory is None:
        return "hardware: the runner reported no hardware inventory with this attempt"
    if inventory.count != declared_count or len(inventory.products) != inventory.count:
        return (f"hardware: the runner declared {declared_count} accelerator(s), its inventory lists "
                f"{inventory.count} ({len(inventory.products)} with a product name)")
    if declared_count == 0:
        return ""
    model = Counter(inventory.products).most_common(1)[0][0]
    if not all(same_accelerator(declared_model, product) for product in inventory.products):
        return f"hardware: the runner declared {declared_model}, its inventory lists {model}"
    return ""
