# Sourced by the scripts/device/*.sh that need the carried wheels: install_site puts .whl/*.whl
# (and the .tar.xz of wheels too large for pip's zip reader, polars) into /tmp/site once per
# machine (again when the names of the wheels carried changed) and puts /tmp/site and the tree
# first on PYTHONPATH; install_spy puts py-spy (.probe-whl) into /tmp/spy. Without wheels (the CPU
# check) nothing is installed.
install_site() {
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
  ls .whl/*.whl > /dev/null 2>&1 || return 0
  local have; have=$(ls .whl | md5sum)
  if [ "$(cat /tmp/site/.done 2>/dev/null)" != "$have" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
    for t in .whl/*.tar.xz; do [ -f "$t" ] && { tar -xJf "$t" -C /tmp/site || return 1; }; done
    echo "$have" > /tmp/site/.done
  fi
}
install_spy() {
  [ -d .probe-whl ] || return 0
  [ -x /tmp/spy/bin/py-spy ] && return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/spy .probe-whl/*.whl
}
