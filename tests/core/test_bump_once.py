"""One bump of the results generation per transaction: a bump already waiting for the commit that covers a
new one stands for both, unless a rollback could drop it while keeping the new one (core.cache)."""

from __future__ import annotations

import pytest
from django.db import transaction

from core import cache as generation

pytestmark = pytest.mark.django_db(transaction=True)


def _moved(round_id: int | None, action) -> tuple[int, int, int | None]:
    """How far each of the generation's numbers moved across `action` (the numbers of `round_id`)."""
    before = generation.generations(round_id)
    action()
    after = generation.generations(round_id)
    return tuple(None if b is None else a - b for a, b in zip(after, before, strict=True))  # type: ignore[return-value]


def test_bumps_of_one_round_in_one_transaction_move_its_numbers_once() -> None:
    def change() -> None:
        with transaction.atomic():
            generation.bump_generation(round_id=7)
            generation.bump_generation(round_id=7)
            with transaction.atomic():  # a nested service's bump, in a savepoint that is kept
                generation.bump_generation(round_id=7)

    assert _moved(7, change) == (1, 0, 1)


def test_a_bump_of_every_round_covers_a_round_s_but_not_the_other_way() -> None:
    def every_then_one() -> None:
        with transaction.atomic():
            generation.bump_generation()
            generation.bump_generation(round_id=7)

    def one_then_every() -> None:
        with transaction.atomic():
            generation.bump_generation(round_id=7)
            generation.bump_generation()

    assert _moved(7, every_then_one) == (1, 1, 0)  # the shared number moves what answers about round 7 hold
    assert _moved(7, one_then_every) == (2, 1, 1)


def test_bumps_of_different_rounds_each_move_their_own() -> None:
    def change() -> None:
        with transaction.atomic():
            generation.bump_generation(round_id=7)
            generation.bump_generation(round_id=8)

    before = generation.generations(8)
    assert _moved(7, change) == (2, 0, 1)
    assert generation.generations(8)[2] == before[2] + 1


def test_a_bump_in_a_savepoint_rolled_back_does_not_stand_for_a_later_one() -> None:
    def change() -> None:
        with transaction.atomic():
            try:
                with transaction.atomic():
                    generation.bump_generation(round_id=7)
                    raise RuntimeError("this savepoint's writes are rolled back, its bump with them")
            except RuntimeError:
                pass
            generation.bump_generation(round_id=7)

    assert _moved(7, change) == (1, 0, 1)


def test_a_bump_in_an_inner_savepoint_does_not_stand_for_an_outer_one() -> None:
    """The inner one was registered in a savepoint the outer one is not in: dropped by its rollback, it must
    not have stood for the outer bump, which is kept."""
    seen: list[int] = []

    def change() -> None:
        with transaction.atomic():
            with transaction.atomic():
                generation.bump_generation(round_id=7)
            generation.bump_generation(round_id=7)
            seen.append(len(transaction.get_connection().run_on_commit))

    assert _moved(7, change) == (2, 0, 2)
    assert seen == [2]


def test_a_bump_outside_a_transaction_moves_at_once() -> None:
    assert _moved(7, lambda: generation.bump_generation(round_id=7)) == (1, 0, 1)
