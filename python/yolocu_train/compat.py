"""Runs ultralytics/yolov5 v7.0's train.py offline on a current stack (torch 2.x, numpy 2, Python 3.12)
without editing its files. Each fix is a small, named patch applied before train.py is imported:

0. torch.cuda.amp.autocast/GradScaler (train.py) only warn on torch 2.x; aliased to torch.amp if gone.
1. torch.load: torch >= 2.6 defaults to weights_only=True, which cannot unpickle yolov5
   checkpoints (attempt_load / strip_optimizer at the end of training) -> default weights_only=False.
2. numpy 2: np.trapz (used by utils/metrics.compute_ap in val) may be missing -> alias np.trapezoid.
3. pkg_resources (utils/general, utils/loggers import it at top; only parse_version/require are
   used) was dropped by recent setuptools -> a minimal stand-in if the import fails.
4. Packages used only for plots/notebooks/logging/downloads (pandas, matplotlib, seaborn, IPython,
   tensorboard, requests) -> inert stand-in modules *only if they are not installed* (plots are
   off via --noplots; the tensorboard writer then discards scalars; nothing is downloaded).
5. wandb / clearml / comet_ml are blocked (ImportError) so nothing tries to log in online.
6. Network checks: check_git_info (runs at train.py import and pip-installs gitpython),
   check_git_status, check_requirements (pip-installs), check_font (downloads Arial.ttf) -> no-ops;
   check_amp (downloads yolov5n.pt to compare, and on failure silently disables AMP) -> True, i.e.
   AMP on, as yolov5 does on a CUDA device when its check passes.
"""
import importlib.util
import sys
import types


class _Inert:
    """Absorbs any attribute access, call, item access or assignment (stand-in for plotting libs)."""

    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        return _Inert()

    def __setattr__(self, name, value):
        pass

    def __call__(self, *a, **k):
        return _Inert()

    def __getitem__(self, k):
        return _Inert()

    def __setitem__(self, k, v):
        pass

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False


class _NullSummaryWriter:
    """Stand-in for torch.utils.tensorboard.SummaryWriter: every method is a no-op. Not callable itself
    (yolov5 registers every callable attribute of its Loggers as a callback)."""

    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None


class _InertModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


def _stub_module(name):
    mod = _InertModule(name)
    mod.__path__ = []  # lets "import a.b" resolve to further stubs
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = mod
    return mod


def _missing(name):
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


def apply(log=print):
    """Applies fixes 1-5 (before anything of yolov5 is imported). Returns the list of fixes applied."""
    import numpy as np
    import torch

    applied = []
    orig_load = torch.load

    def load(*args, **kwargs):
        kwargs.setdefault("weights_only", False)
        return orig_load(*args, **kwargs)

    torch.load = load
    applied.append("torch.load(weights_only=False)")

    # torch.cuda.amp.autocast / GradScaler are deprecated aliases in torch 2.x (FutureWarning only);
    # if a future torch drops them, route them to torch.amp.
    import torch.cuda.amp as cuda_amp
    if not hasattr(cuda_amp, "autocast"):
        cuda_amp.autocast = lambda enabled=True, **k: torch.amp.autocast("cuda", enabled=enabled, **k)
        applied.append("torch.cuda.amp.autocast -> torch.amp.autocast")
    if not hasattr(cuda_amp, "GradScaler"):
        cuda_amp.GradScaler = lambda **k: torch.amp.GradScaler("cuda", **k)
        applied.append("torch.cuda.amp.GradScaler -> torch.amp.GradScaler")

    if not hasattr(np, "trapz"):
        np.trapz = np.trapezoid
        applied.append("np.trapz=np.trapezoid")

    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        pk = types.ModuleType("pkg_resources")

        def parse_version(v):
            try:
                from packaging.version import parse
                return parse(v)
            except ImportError:
                return tuple(int(x) if x.isdigit() else 0 for x in str(v).split("+")[0].split("."))

        pk.parse_version = parse_version
        pk.require = lambda *a, **k: None
        sys.modules["pkg_resources"] = pk
        applied.append("pkg_resources stand-in")

    for name, subs in (("pandas", ()), ("matplotlib", ("matplotlib.pyplot",)), ("seaborn", ()),
                       ("IPython", ("IPython.display",)), ("requests", ())):
        if _missing(name):
            _stub_module(name)
            for s in subs:
                _stub_module(s)
            applied.append(f"stub {name}")
    if _missing("tensorboard"):
        tb = types.ModuleType("torch.utils.tensorboard")
        tb.SummaryWriter = _NullSummaryWriter
        sys.modules["torch.utils.tensorboard"] = tb
        applied.append("stub torch.utils.tensorboard")
    if _missing("tqdm"):
        tq = types.ModuleType("tqdm")

        class tqdm:  # noqa: N801  (same name as the real class)
            def __init__(self, iterable=None, *a, **k):
                self.iterable = iterable

            def __iter__(self):
                return iter(self.iterable)

            def set_description(self, *a, **k):
                pass

            def update(self, *a, **k):
                pass

            def close(self):
                pass

        tq.tqdm = tqdm
        sys.modules["tqdm"] = tq
        applied.append("stub tqdm")
    for name in ("wandb", "clearml", "comet_ml"):
        sys.modules[name] = None
    applied.append("block wandb/clearml/comet_ml")
    log("compat: " + ", ".join(applied))
    return applied


def patch_yolov5_checks(log=print):
    """Fix 6: called after yolov5's root is on sys.path, before `import train`."""
    import utils.general as g

    g.check_git_info = lambda path=".": {"remote": None, "branch": None, "commit": None}
    g.check_git_status = lambda *a, **k: None
    g.check_requirements = lambda *a, **k: None
    g.check_font = lambda *a, **k: None
    g.check_amp = lambda model: True
    log("compat: yolov5 offline (check_git_info/git_status/requirements/font no-ops, check_amp -> True)")
