"""ipykernel.comm as pyc serves it: ipywidgets 6 does `from ipykernel.comm import Comm` and expects comms
that reach the frontend; ipykernel's own need a running ipykernel.  These are pyc._comm's (the same classes
the `comm` package gets), and ipykernel.comm.comm and ipykernel.comm.manager name this module too."""

import sys

from pyc._comm import Comm, CommManager

__all__ = ["Comm", "CommManager"]

sys.modules.setdefault("ipykernel.comm.comm", sys.modules[__name__])
sys.modules.setdefault("ipykernel.comm.manager", sys.modules[__name__])
