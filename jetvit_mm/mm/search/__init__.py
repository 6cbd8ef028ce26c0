"""The search as an mmengine validation loop: its identity, its scoring, the loop."""
