"""A cheap password hasher for tests whose hashes any Taproot process can still check.

It is Django's PBKDF2 hasher with one iteration: the hash records its iteration count,
so a server started by a test (with the normal hashers) verifies it like any other.
"""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
