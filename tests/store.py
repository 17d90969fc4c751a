"""What the database holds: a memory as stored, and the whole store, to prove that a
refused call changed nothing."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.apps import apps
from django.db import transaction
from django.db.models import Model
from oauth2_provider.models import get_access_token_model

from memories.models import Memory


def stored(memory: Memory) -> Memory:
    """The memory as the database holds it now."""
    return Memory.objects.get(pk=memory.pk)


def stored_columns(memory: Memory) -> dict[str, Any]:
    """Every stored column of a memory, re-read from the database."""
    fresh = stored(memory)
    return {f.attname: getattr(fresh, f.attname) for f in Memory._meta.concrete_fields}


def guarded_models() -> list[type[Model]]:
    """Every table a refused call could change: all of Taproot's own, and the OAuth
    access tokens /mcp calls are made with."""
    return [*apps.get_app_config("memories").get_models(), get_access_token_model()]


def store_state() -> dict[str, list[dict[str, Any]]]:
    """Every row of those tables, every column (recall bookkeeping included)."""
    return {
        model._meta.label: list(model._default_manager.order_by("pk").values())
        for model in guarded_models()
    }


@contextmanager
def unchanged(case: object = "the store changed") -> Iterator[None]:
    """`with unchanged():` asserts the block leaves every row of the store as it was;
    `case` says what was tried, when one test tries several."""
    before = store_state()
    yield
    assert store_state() == before, case


@contextmanager
def rolled_back() -> Iterator[None]:
    """A transaction undone at its end, for one example of a property test. Django marks
    it as it marks a test case's own, so the services that must be outermost
    (atomic(durable=True)) run inside it as they run inside any test."""
    atomic = transaction.atomic()
    atomic._from_testcase = True  # type: ignore[attr-defined]
    with atomic:
        yield
        transaction.set_rollback(True)


def domain_error_kinds(*, operator: bool = False) -> set[type]:
    """Every kind of refusal memories.errors defines (DomainError's subclasses there) that
    Claude and the dashboard may meet, or with operator=True those only the operator's
    tools meet (OperatorRefusal's)."""
    from memories import errors

    base = errors.OperatorRefusal if operator else errors.DomainError
    return {
        cls
        for cls in vars(errors).values()
        if isinstance(cls, type)
        and issubclass(cls, base)
        and (operator or not issubclass(cls, errors.OperatorRefusal))
    } - {errors.DomainError, errors.OperatorRefusal}
