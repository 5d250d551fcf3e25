"""Checks of the claims about t = 0 and Phase 1 that need whole matrices or single neurons
(docs/claims.md rows D1-E26), read from a seed's saved states (initial and T1)."""

from __future__ import annotations
