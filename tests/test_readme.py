"""README.md as a product page: its speed table's provenance, its wall-time estimates and its inventories hold."""
import importlib.util
import json
import re
import subprocess

import pytest

from .conftest import REPO

README = (REPO / 'README.md').read_text()
SPEED_HEADER = '| machine | precision, mode | teacher ms | 2F | all-L | date (UTC) | code | stack | raw |'


def speed_rows():
    """The speed table's rows, as lists of cells."""
    lines = README.splitlines()
    start = lines.index(SPEED_HEADER) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith('|'):
            break
        rows.append([c.strip() for c in line.strip('|').split('|')])
    return rows


def test_one_speed_table_near_the_top():
    assert README.count(SPEED_HEADER) == 1
    assert README.index(SPEED_HEADER) < README.index('## Set-up')
    assert len(speed_rows()) >= 3


def test_every_speed_figure_is_its_raw_files():
    """Each row's teacher latency, speed-ups, date and torch version are those of the JSON it links; its code is a
    commit of this repository or says it was not recorded."""
    for row in speed_rows():
        machine, mode, teacher, two_f, all_l, date, code, stack, raw = row
        path = re.search(r'\((docs/raw/[^)]+\.json)\)', raw).group(1)
        result = json.loads((REPO / path).read_text())
        size = (re.findall(r'\d+x\d+', mode) or ['1024x2048'])[0]
        by_label = {r['label']: r for r in result['rows'] if r['size'] == size}
        assert teacher == f"{by_label['teacher']['median_ms']:.1f}", row
        assert (two_f, all_l) == (f"x{by_label['2F']['speedup']:.2f}", f"x{by_label['all-L']['speedup']:.2f}"), row
        assert date == result['date'][:16].replace('T', ' '), row
        assert f"torch {result['machine']['torch']}" in stack, row
        assert ('H200' in machine) == (result['machine'].get('cuda_device') == 'NVIDIA H200'), row
        assert result['args']['dtype'] in mode, row
        if code != 'not recorded':
            commit = code.split()[-1]
            assert subprocess.run(['git', 'cat-file', '-e', f'{commit}^{{commit}}'], cwd=REPO).returncode == 0, row


def _estimates_module():
    spec = importlib.util.spec_from_file_location('real_data_estimates', REPO / 'scripts' / 'real_data_estimates.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wall_time_estimates_are_computed_from_the_configs_and_measurements():
    """README's 8-GPU table and docs/raw/real_data_estimates_8gpu.json are what the script computes now."""
    result = _estimates_module().report()
    assert '\n'.join(result['markdown']) in README
    saved = json.loads((REPO / 'docs' / 'raw' / 'real_data_estimates_8gpu.json').read_text())
    assert saved['markdown'] == result['markdown'] and saved['stages'] == json.loads(json.dumps(result['stages']))
    assert 'estimates, not measurements' in README


def test_wall_time_arithmetic():
    module = _estimates_module()
    StageCost, stage_hours = module.StageCost, module.stage_hours  # noqa: N806
    h = stage_hours(StageCost('s', 'c', iters=3600, batch_per_gpu=2, frozen_ms=100, trained_ms=100, eval_images=7200,
                          eval_gpus=2, eval_ms=1000))
    assert h['train_h'] == pytest.approx(3600 * 2 * 400 / 3.6e6) and h['eval_h'] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="stage 's'"):
        stage_hours(StageCost('s', 'c', eval_gpus=0))


def test_teacher_vs_hybrid_picture_shows_no_toy_latency():
    """The inference pictures are of the toy models: none shown may print latencies (the hybrid is slower there)."""
    assert 'infer_compare.png' not in README


def _layout_entry(name: str) -> str:
    block = README[README.index('## Layout'):]
    return re.search(rf'^{name}/\s+(.*?)(?=^\S)', block, re.S | re.M).group(1)


def test_tools_and_docs_listed_as_on_disk():
    tools = set(re.findall(r'([\w]+\.py)', _layout_entry('tools')))
    assert tools == {p.name for p in (REPO / 'tools').glob('*.py')}
    docs = set(re.findall(r'([\w]+\.md)', _layout_entry('docs')))
    assert docs == {p.name for p in (REPO / 'docs').glob('*.md')}


def test_benchmark_subcommands_listed():
    source = (REPO / 'tools' / 'benchmark.py').read_text()
    commands = set(re.findall(r"sub\.add_parser\('([\w-]+)'", source))
    assert {'models', 'mixers'} <= commands
    listed = re.search(r'`tools/benchmark.py` \(subcommands ([^)]*)\)', README).group(1)
    assert set(re.findall(r'`([\w-]+)`', listed)) == commands


def test_registered_names_and_model_names_listed():
    import mmengine.registry as registries

    import jetvit_mm.mm  # noqa: F401  (registers)
    from jetvit_mm.models.variants import VARIANTS
    paragraph = README[README.index('Registered names'):README.index('a model JetViT cannot reproduce')]
    listed = set(re.findall(r'`(\w+)`', paragraph))
    ours = {name for reg in vars(registries).values() if isinstance(reg, registries.Registry)
            for name, cls in reg.module_dict.items() if getattr(cls, '__module__', '').startswith('jetvit_mm')}
    assert ours - listed == set(), 'registered but not in README'
    assert set(VARIANTS) - listed == set(), 'model names not in README'
