"""ipykernel.zmqshell as pyc serves it: the module in which libraries look for the shell of a Jupyter
kernel.  tqdm 4.67's tqdm.autonotebook picks its notebook bar only when "ipykernel.zmqshell" is in
sys.modules, and others import ZMQInteractiveShell from here to ask whether get_ipython() is a kernel's.

pyc's ZMQInteractiveShell (pyc._ipython) is the shell get_ipython() returns; the kernel registers this module
under that name when the shell is made (pyc._ipython.attach), whether or not ipykernel is installed, and the
kernel's importer serves it for `import ipykernel.zmqshell` (an installed ipykernel's own would need a
running ipykernel)."""

from pyc._ipython import ZMQInteractiveShell

__all__ = ["ZMQInteractiveShell"]
