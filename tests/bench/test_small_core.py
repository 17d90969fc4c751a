"""bench.small_core: the store with a small core tier keeps the most recently touched core
memories, and the kept counts follow."""

from datetime import timedelta

import pytest

from bench.small_core import keep_core
from memories.models import Memory
from memories.models.counts import counted_rows, kept_counts
from tests.conftest import NOW

pytestmark = pytest.mark.django_db


def test_all_but_the_most_recently_touched_core_memories_are_made_non_core(
    user, other_user, make_memory
):
    core = [make_memory(core=True, updated_at=NOW - timedelta(days=i)) for i in range(5)]
    make_memory(core=True, archived_at=NOW, archive_reason="x", updated_at=NOW)
    theirs = make_memory(owner=other_user, core=True, updated_at=NOW - timedelta(days=9))

    keep_core(user, 2)

    live_core = Memory.objects.filter(owner=user, core=True, archived_at__isnull=True)
    assert set(live_core.values_list("id", flat=True)) == {core[0].pk, core[1].pk}
    assert Memory.objects.get(pk=theirs.pk).core is True
    assert kept_counts() == counted_rows()
