"""Moved to :mod:`jetvit_mm.depth.formats`; this name stays for the dataset generators until they import it from
there."""
from jetvit_mm.depth.formats import *  # noqa: F401,F403
