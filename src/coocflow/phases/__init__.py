"""Phase analysis and the machine check of the paper's claims (`coocflow verify`)."""

from coocflow.phases.boundaries import (
    common_token_catch_up,
    first_time_all_correct,
    phase2_start,
    phase_boundaries,
)

__all__ = ["common_token_catch_up", "first_time_all_correct", "phase2_start", "phase_boundaries"]
