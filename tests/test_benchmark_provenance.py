"""Every JSON tools/benchmark.py writes records where and with what it was measured (issue #32 item 4): the commit,
the CPU model and its bf16 units, the GPU, and the torch / Triton / timm versions."""
import json
import subprocess

import pytest
import torch

from jetvit_mm.benchmark.host import machine_record

from .conftest import REPO, run_tool

pytestmark = pytest.mark.integration  # every test here starts a process


def test_machine_record_names_commit_cpu_and_versions():
    record = machine_record(torch.device('cpu'))
    head = subprocess.run(['git', 'rev-parse', '--short=12', 'HEAD'], cwd=REPO, capture_output=True, text=True)
    assert record['commit'].split('+')[0] == head.stdout.strip()
    assert record['processor'] and record['processor'] != 'x86_64'  # the model name, not the architecture
    assert set(record['bf16_units']) <= {'amx_bf16', 'avx512_bf16'}
    assert record['torch'] == torch.__version__ and record['timm'] and 'triton' in record
    assert record['cuda_device'] is None


def test_every_subcommand_json_has_the_machine(tmp_path):
    out = tmp_path / 'plan.json'
    run_tool('benchmark.py', 'plan', REPO / 'configs' / 'jetvit' / 'dinov3_base_cityscapes.py', '--world-size', '8',
             '--json', out)
    machine = json.loads(out.read_text())['machine']
    assert machine['commit'] and machine['processor'] and machine['torch'] == torch.__version__
