"""A run of a flow: the engine's transitions, the run's state, every path it can take,
the results it returns, and replaying or moving its recorded steps."""
