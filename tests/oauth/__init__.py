"""Tests of the oauth app: the OAuth flow end to end, registration, consent, tokens, clean-up."""
