"""scripts/install.sh's choice of mmcv ops (issue #30 item 7): CUDA kernels when a GPU and nvcc are both present, CPU
ops otherwise, the override checked, The decision is printed by
``install.sh --mmcv-ops`` before anything is installed; the GPU and the toolkit are stand-in executables on the PATH
(this machine has neither)."""
import os
import subprocess
from pathlib import Path
from typing import Dict, Optional

import pytest

pytestmark = pytest.mark.integration  # every test here starts a process

REPO = Path(__file__).resolve().parents[1]
GPU_LIST = 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'


def mmcv_ops(tmp_path: Path, tools: Dict[str, str], env: Optional[Dict[str, str]] = None):
    """Run ``install.sh --mmcv-ops`` with only ``tools`` (name -> what it prints) beside the basic system tools."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    for name, text in tools.items():
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\necho "{text}"\n')
        path.chmod(0o755)
    system = [d for d in os.environ['PATH'].split(os.pathsep)
              if not any((Path(d) / t).exists() for t in ('nvcc', 'nvidia-smi'))]
    run_env = {'PATH': os.pathsep.join([str(bin_dir), *system]), 'HOME': str(tmp_path), **(env or {})}
    return subprocess.run(['bash', str(REPO / 'scripts' / 'install.sh'), '--mmcv-ops'], env=run_env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize('tools, ops', [
    ({}, 'cpu'),
    ({'nvcc': 'Cuda compilation tools, release 13.0'}, 'cpu'),  # a toolkit but no GPU
    ({'nvidia-smi': GPU_LIST}, 'cpu'),  # a GPU but no compiler: the CUDA ops cannot be built
    ({'nvidia-smi': 'No devices were found', 'nvcc': 'release 13.0'}, 'cpu'),
    ({'nvidia-smi': GPU_LIST, 'nvcc': 'release 13.0'}, 'cuda'),
], ids=['nothing', 'nvcc_only', 'gpu_only', 'no_device', 'gpu_and_nvcc'])
def test_mmcv_ops_follow_the_machine(tmp_path, tools, ops):
    proc = mmcv_ops(tmp_path, tools)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ops
    assert not (tmp_path / '.cache').exists()  # the question installs nothing


@pytest.mark.parametrize('forced', ['cpu', 'cuda'])
def test_mmcv_ops_override(tmp_path, forced):
    proc = mmcv_ops(tmp_path, {'nvidia-smi': GPU_LIST, 'nvcc': 'release 13.0'} if forced == 'cpu' else {},
                    env={'JETVIT_MMCV_OPS': forced})
    assert proc.returncode == 0 and proc.stdout.strip() == forced


def test_mmcv_ops_unknown_override_is_named(tmp_path):
    proc = mmcv_ops(tmp_path, {}, env={'JETVIT_MMCV_OPS': 'rocm'})
    assert proc.returncode != 0
    assert 'JETVIT_MMCV_OPS=rocm' in proc.stderr and 'cpu, cuda or auto' in proc.stderr

