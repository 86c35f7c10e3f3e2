# Sourced by the GPU scripts: installs the wheels in .whl/ whose module is missing from $py, with
# no index and no dependencies, into build/pydeps, and puts that on PYTHONPATH.
_deps_dir="$root/build/pydeps"
mkdir -p "$_deps_dir"
export PYTHONPATH="$_deps_dir${PYTHONPATH:+:$PYTHONPATH}"
for _pair in yaml:PyYAML tqdm:tqdm psutil:psutil PIL:pillow setuptools:setuptools; do
  _mod=${_pair%%:*}; _whl=${_pair#*:}
  if ! "$py" -c "import $_mod" 2>/dev/null; then
    _file=$(ls "$root"/.whl/"$_whl"-*.whl 2>/dev/null | head -1)
    if [ -n "$_file" ]; then
      echo "py_deps: installing $(basename "$_file")"
      "$py" -m pip install --quiet --no-index --no-deps --target "$_deps_dir" "$_file" || echo "py_deps: install of $_whl failed"
    else
      echo "py_deps: $_mod missing and no wheel for it in .whl/"
    fi
  fi
done
# torch.utils.cpp_extension.load needs a ninja executable.
if ! command -v ninja >/dev/null 2>&1; then
  _file=$(ls "$root"/.whl/ninja-*.whl 2>/dev/null | head -1)
  if [ -n "$_file" ]; then
    echo "py_deps: installing $(basename "$_file") (no ninja on PATH)"
    "$py" -m pip install --quiet --no-index --no-deps --target "$_deps_dir" "$_file" || echo "py_deps: ninja install failed"
  fi
  export PATH="$_deps_dir/bin:$PATH"
  command -v ninja >/dev/null 2>&1 || echo "py_deps: still no ninja (the extension build will fail)"
fi
