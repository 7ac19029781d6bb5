"""A flow: its model, loading its YAML safely, lint, building, its files on disk, drafts
and what changes between two versions."""
