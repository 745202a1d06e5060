"""``import torch_npu`` in a process started by a script that runs under ``python -m npugraph.compat``:
that launcher puts this folder on the children's PYTHONPATH, so that a test which runs
``python -c "import torch, torch_npu ..."`` gets the shim as its parent has it (with the npu device
when NPUGRAPH_NPU_DEVICE=1). Importing this module installs the shim, which puts its own
``torch_npu`` module in sys.modules: that is what ``import torch_npu`` then gives."""
import os as _os

import npugraph.compat as _compat

_compat.install(npu_device=_os.environ.get("NPUGRAPH_NPU_DEVICE", "0") not in ("", "0"))
