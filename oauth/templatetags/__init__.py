"""Template filters of the consent page (where a long client URL may wrap)."""
