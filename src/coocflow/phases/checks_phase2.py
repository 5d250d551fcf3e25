"""Checks of the claims about T1 and Phase 2 that need whole matrices or per-sample values
(docs/claims.md rows E9-T3.3), read from a seed's saved states (initial, T1 and final)."""

from __future__ import annotations
