"""What every room shares: the error shape, limits, caller text, names, JSON, a cache and
graph algorithms."""
