"""A flow's checks: scenarios, guarantees over every path, coverage, its tests files,
and a recorded run captured as a scenario."""
