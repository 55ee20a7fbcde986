"""The boot code of pyc-kernel's interpreter, run once by src/py/init.c before anything else of pyc's.

It installs the import finder that serves the `pyc` package from the files compiled into the program
(``files``, a dict of relative path to memoryview, is put into this module's globals by init.c), so that the
kernel needs no data files beside it.  This file is compiled into the program with the package, but it is
not a module of it: nothing imports it.

The finder also
  * selects pyc's matplotlib backend: when matplotlib is first imported and the user chose no backend
    (MPLBACKEND unset), it sets MPLBACKEND for that import only; after_cell removes it again once matplotlib
    is loaded, so that child processes, which cannot import pyc, never see it;
  * runs a pyc function right after some modules are imported (AFTER): the `comm` package (ipywidgets 8
    and friends) is pointed at pyc's comms, importing IPython makes the IPython shell bound to the kernel
    (pyc._ipython), which is how IPython comes to be there without ever being imported at start, and
    importing asyncio makes the kernel's event loop (pyc._asyncio), threads started once threading is
    imported write to the cell that started them (pyc._threads), and getpass.getpass asks the frontend
    (getpass is not imported at start: with termios it cost about 1 ms and 200 KB of every start);
  * imports IPython, when it is installed, before modules that look for it in sys.modules instead of
    importing it (BEFORE: tqdm.auto chooses its notebook bar so);
  * serves pyc's own modules for ipykernel.comm and ipykernel.zmqshell (SERVED: ipywidgets 6 imports Comm
    from the first, libraries look for the kernel's shell in the second, and the real ones need a running
    ipykernel);
  * shows, in after_cell (run by the kernel after every cell), the figures a cell left open.
"""

import os as _os
import sys as _sys


AFTER = {"comm": ("pyc._comm", "hook_comm_package"), "IPython": ("pyc._ipython", "attach_after_import"),
         "asyncio": ("pyc._asyncio", "install"), "threading": ("pyc._threads", "install"),
         "getpass": ("pyc", "_hook_getpass")}
BEFORE = {"tqdm.autonotebook": "IPython"}
SERVED = {"ipykernel.comm": "pyc/_ipykernel_comm.py", "ipykernel.zmqshell": "pyc/_ipykernel_zmqshell.py"}


class PycFinder:
    """Serves the modules of the pyc package compiled into the kernel."""

    def __init__(self, files):
        self.files = files
        self.mpl_env = False

    def _locate(self, fullname):
        if fullname in SERVED:
            return SERVED[fullname], False
        rel = fullname.replace('.', '/')
        if rel + '/__init__.py' in self.files:
            return rel + '/__init__.py', True
        if rel + '.py' in self.files:
            return rel + '.py', False
        return None, False

    def find_spec(self, fullname, path=None, target=None):
        if fullname == 'matplotlib' and self.mpl_env is False and 'MPLBACKEND' not in _os.environ \
                and 'pyc/mpl_backend.py' in self.files:
            _os.environ['MPLBACKEND'] = 'module://pyc.mpl_backend'
            self.mpl_env = True
        if fullname in AFTER or fullname in BEFORE:
            return self._hooked_spec(fullname, path)
        if fullname in SERVED:
            return type(_sys.__spec__)(fullname, self, origin='<pyc>/' + SERVED[fullname])
        if fullname != 'pyc' and not fullname.startswith('pyc.'):
            return None
        fn, pkg = self._locate(fullname)
        if fn is None:
            return None
        return type(_sys.__spec__)(fullname, self, origin='<pyc>/' + fn, is_package=pkg)

    def _hooked_spec(self, fullname, path):
        """The module's own spec, its loader wrapped to run the BEFORE import and the AFTER function."""
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        real = spec.loader.exec_module

        def exec_module(module):
            if fullname in BEFORE:
                try:
                    __import__(BEFORE[fullname])
                except ImportError:
                    pass
            real(module)
            if fullname in AFTER:
                where, name = AFTER[fullname]
                getattr(__import__(where, fromlist=[name]), name)(module)
        spec.loader.exec_module = exec_module    # the loader is this module's own (PathFinder made it)
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        origin = module.__spec__.origin
        code = compile(bytes(self.files[origin[6:]]), origin, 'exec', dont_inherit=True)
        exec(code, module.__dict__)

    def get_source(self, fullname):
        fn = self._locate(fullname)[0]
        return None if fn is None else bytes(self.files[fn]).decode('utf-8')

    def is_package(self, fullname):
        return self._locate(fullname)[1]

    def after_cell(self):
        if self.mpl_env and 'matplotlib' in _sys.modules:
            if _os.environ.get('MPLBACKEND') == 'module://pyc.mpl_backend':
                del _os.environ['MPLBACKEND']
            self.mpl_env = None
        m = _sys.modules.get('pyc.mpl_backend')
        if m is not None and hasattr(m, 'flush_figures'):
            m.flush_figures()


finder = PycFinder(files)  # noqa: F821 (files is given by init.c)
_sys.meta_path.insert(0, finder)
