"""A flow drawn: its layout, the SVG diagram, a text tree, a run on its flow and many
runs' usage."""
