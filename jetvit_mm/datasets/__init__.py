"""The depth datasets' file formats (depth_formats.py); the generators the tests use are in jetvit_mm.testing."""
