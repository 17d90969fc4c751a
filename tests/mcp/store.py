"""What the database holds, to prove that a refused call changed nothing."""

from typing import Any

from oauth2_provider.models import get_access_token_model

from memories.models import Closing, Memory, MemoryTag, MemoryToken, Revision, Snapshot


def store_state() -> dict[str, Any]:
    """Every Taproot row, every column (recall bookkeeping included)."""
    return {
        "memories": list(Memory.objects.order_by("pk").values()),
        "closings": list(Closing.objects.order_by("pk").values()),
        "revisions": list(Revision.objects.order_by("pk").values()),
        "snapshots": list(Snapshot.objects.order_by("pk").values_list("pk", flat=True)),
        "tokens": MemoryToken.objects.count(),
        "tags": MemoryTag.objects.count(),
        "access_tokens": get_access_token_model().objects.count(),
    }
