"""A worker reads its recent owners' common words ahead, at its start (issue 32, item 3).

A recall of common words is served from their postings held in the worker
(memories.recall.postings), but reads each word's postings the first time a recall asks
for it: 2–5 ms a word on SQLite at 100,000 memories, so the first recalls of common words
in a worker that had just started took half again the time of later ones. So a worker,
as it starts and before it serves a call, reads the postings of the words common among
the newest memories (a sample: counting every posting of 100,000 memories takes seconds)
of the owners who hold an access token still valid (those who will call soon), the
latest issued first, stores too small to hold any words left out: the commonest words
first, 16 a statement, and each owner's entries' salience with them, within half the
postings budget in all (the other half is left to the words recalls ask for). At 100,000
memories that is about 150 words and two seconds.

It is done before the worker serves, not beside the calls: read while an owner's first
calls were served, on a thread of the worker's own, it made those calls up to 47 % slower
for the seconds it took (docs/benchmarks.md). The owners' vectors are not read ahead: the
first recall by meaning reads them, as before. TAPROOT_WARM_OWNERS=false turns it off.
"""

import logging
import math

from django.db.models import Max
from django.utils import timezone

from memories.models import RecallIndex
from memories.recall.owner_index import keys_of_newest
from memories.recall.postings import POSTINGS, Postings

logger = logging.getLogger(__name__)

# Owners with fewer live memories have no postings warmed: a word must hold WORTH postings
# to be read ahead, and the first reads of smaller stores' words cost little.
WARM_FROM = 4000
# The newest memories whose keys are counted to find the common words, and the postings
# a word holds at least, by that count, to be warmed (reading 2,000 postings takes about
# half a millisecond on SQLite; 20,000, 2–5 ms).
SAMPLE = 2000
WORTH = 2000
# Words read in one statement: a statement's lists are held in full while parsed.
BATCH = 16


def common_words(owner_id: int, live: int, room: int) -> list[str]:
    """The words common among the owner's newest memories, commonest first (ties by the
    word), as many as their postings fit in `room` bytes by the share of the sample that
    holds each; none for a store under WARM_FROM."""
    if live < WARM_FROM or room <= 0:
        return []
    newest = min(live, SAMPLE)
    least = max(2, math.ceil(WORTH * newest / live))
    counted = keys_of_newest(owner_id, newest=newest, least=least)
    chosen: list[str] = []
    for key, count in sorted(counted.items(), key=lambda item: (-item[1], item[0])):
        # Per posting: its entry (8 bytes) and whether it is a keyword (1).
        cost = 9 * math.ceil(count * live / newest) + Postings.OVERHEAD
        if cost > room:
            break
        chosen.append(key)
        room -= cost
    return chosen


def warm_recent_owners() -> None:
    """Read ahead the common words of the owners holding a valid access token (see the
    module's doc); a failure is logged, and the worker starts all the same."""
    from django.conf import settings

    if not settings.TAPROOT_WARM_OWNERS:
        return
    try:
        for owner_id, live in recent_owners():
            room = POSTINGS.budget // 2 - POSTINGS.held_bytes()
            words = common_words(owner_id, live, room)
            for start in range(0, len(words), BATCH):
                POSTINGS.statistics(owner_id, words[start : start + BATCH])
    except Exception:  # only a head start: the worker starts without it
        logger.warning("Could not read recent accounts' common words ahead.", exc_info=True)


def recent_owners() -> list[tuple[int, int]]:
    """The owners holding an access token still valid whose stores are large enough to be
    read ahead (WARM_FROM), each with its live memories, the latest token issued first."""
    from oauth2_provider.models import get_access_token_model

    sizes = dict(
        RecallIndex.objects.filter(live_memories__gte=WARM_FROM).values_list(
            "owner_id", "live_memories"
        )
    )
    if not sizes:
        return []
    tokens = get_access_token_model().objects.filter(
        expires__gt=timezone.now(), user_id__in=list(sizes)
    )
    latest = tokens.values("user_id").annotate(latest=Max("created")).order_by("-latest", "user_id")
    return [(row["user_id"], sizes[row["user_id"]]) for row in latest]
