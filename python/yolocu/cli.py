"""The `yolocu` console script: `yolocu serve ...` starts the Triton server (yolocu.serve); every
other command (detect, eval, infer, inspect, bench) runs the C++ CLI shipped inside the package."""
import os
import sys


def cli_path() -> str:
    """The C++ `yolocu` executable installed with the package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "yolocu")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        from .serve import main as serve_main
        return serve_main(argv[1:])
    exe = cli_path()
    if not os.path.isfile(exe):
        print(f"yolocu: the C++ CLI is missing from the package ({exe})", file=sys.stderr)
        return 2
    if argv in ([], ["--help"], ["-h"], ["help"]):
        print("yolocu serve --model M.onnx [options]   NVIDIA Triton server (see yolocu serve --help)")
    sys.stdout.flush()
    # `yolocu eval --plots DIR` draws with `$YOLOCU_PYTHON -m yolocu.plots`: this interpreter, which has the package
    os.environ.setdefault("YOLOCU_PYTHON", sys.executable)
    # A CUDA build's libraries from NVIDIA's wheels anywhere on sys.path (the CLI's RUNPATH covers
    # wheels beside the package only).
    from ._cuda_libs import library_dirs
    dirs = library_dirs()
    if dirs:
        env_path = os.environ.get("LD_LIBRARY_PATH", "")
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(dirs + ([env_path] if env_path else []))
    os.execv(exe, [exe] + argv)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
