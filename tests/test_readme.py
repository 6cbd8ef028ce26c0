"""README.md as a product page a newcomer reads in ten minutes (set-up first, short, every docs page linked), and
the facts it points to on the docs pages: the speed table's provenance (docs/benchmarks.md), the wall-time estimates
(docs/pipeline.md), the demo's table (docs/toy_reproduction.md) and the inventories (docs/architecture.md,
docs/benchmarks.md, docs/plugin.md); every relative link of README.md and docs/*.md resolves."""
import importlib.util
import json
import re
import subprocess
from pathlib import Path
from typing import List

import pytest

from .conftest import REPO

README = (REPO / 'README.md').read_text()
DOCS_DIR = REPO / 'docs'
BENCHMARKS = (DOCS_DIR / 'benchmarks.md').read_text()
SPEED_HEADER = '| machine | precision, mode | teacher ms | 2F | all-L | date (UTC) | code | stack | raw |'
DEMO_HEADER = '| model | arch | mIoU | speed-up at 1024x2048 |'
DEMO_RAW = DOCS_DIR / 'raw' / 'demo_alternatives_2026-12-02' / 'results.json'
MAX_README_LINES = 200
SETUP_BY_LINE = 25


def _pages() -> List[Path]:
    """README.md and every page of docs/ (not docs/raw/: the run history)."""
    return [REPO / 'README.md'] + sorted(DOCS_DIR.glob('*.md'))


def _table_rows(text: str, header: str) -> List[List[str]]:
    """The rows of the markdown table under ``header``, as lists of cells."""
    lines = text.splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith('|'):
            break
        rows.append([c.strip() for c in line.strip('|').split('|')])
    return rows


def speed_rows():
    """The speed table's rows (docs/benchmarks.md), as lists of cells."""
    return _table_rows(BENCHMARKS, SPEED_HEADER)


# ----------------------------------------------------------------------------- the README itself
def test_readme_is_short_and_sets_up_first():
    lines = README.splitlines()
    assert len(lines) <= MAX_README_LINES, f'README.md has {len(lines)} lines (at most {MAX_README_LINES})'
    first = [line.split('#')[0].strip() for line in lines[:SETUP_BY_LINE]]
    assert 'make demo' in first and 'make test' in first, f'`make demo` / `make test` not within line {SETUP_BY_LINE}'


def test_readme_links_every_docs_page():
    """Every docs page a README link names exists, and every docs page is linked from the README."""
    linked = set(re.findall(r'\]\((docs/[\w.-]+\.md)(?:#[\w-]*)?\)', README))
    missing = {p for p in linked if not (REPO / p).is_file()}
    assert not missing, f'README links pages that do not exist: {missing}'
    on_disk = {f'docs/{p.name}' for p in DOCS_DIR.glob('*.md')}
    assert on_disk - linked == set(), 'docs pages the README does not link'


def test_readme_has_no_wide_lines():
    """No 350-character table rows any more: the wide tables live on the docs pages."""
    wide = [n for n, line in enumerate(README.splitlines(), 1) if len(line) > 120]
    assert not wide, f'README lines over 120 characters: {wide}'


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def _anchors(text: str) -> set:
    return {_slug(m) for m in re.findall(r'^#{1,6} (.+)$', _outside_code(text), re.M)}


def _outside_code(text: str) -> str:
    """``text`` without its fenced code blocks (a ``](`` in code is not a link)."""
    return re.sub(r'^```.*?^```', '', text, flags=re.S | re.M)


def relative_link_errors(page: Path, root: Path = REPO) -> List[str]:
    """Each relative link (or image) of ``page`` that names no file, or an anchor its page lacks."""
    errors = []
    for target in re.findall(r'\]\(([^)\s]+)\)', _outside_code(page.read_text())):
        if re.match(r'^[a-z]+:', target):
            continue  # http(s), mailto
        path, _, anchor = target.partition('#')
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            errors.append(f'{page.relative_to(root)}: {target} (no such file)')
        elif anchor and file.suffix == '.md' and anchor not in _anchors(file.read_text()):
            errors.append(f'{page.relative_to(root)}: {target} (no such heading)')
    return errors


def test_every_relative_link_resolves():
    errors = [e for page in _pages() for e in relative_link_errors(page)]
    assert not errors, '\n'.join(errors)


def test_link_check_finds_a_broken_link(tmp_path):
    (tmp_path / 'there.md').write_text('# A heading\n')
    page = tmp_path / 'page.md'
    page.write_text('[ok](there.md) [ok](there.md#a-heading) [bad](gone.md) [bad](there.md#nope)\n'
                    '```\n[not a link](inside_code.md)\n```\n')
    errors = relative_link_errors(page, root=tmp_path)
    assert errors == ['page.md: gone.md (no such file)', 'page.md: there.md#nope (no such heading)']


# ----------------------------------------------------------------------------- the speed table (docs/benchmarks.md)
def test_one_speed_table_near_the_top():
    """One speed table, at the top of docs/benchmarks.md (before the commands and the single benchmarks); the
    README only points there."""
    assert BENCHMARKS.count(SPEED_HEADER) == 1
    assert BENCHMARKS.index(SPEED_HEADER) < BENCHMARKS.index('## Running a benchmark')
    assert BENCHMARKS.index(SPEED_HEADER) < BENCHMARKS.index('## Token mixers (CPU)')
    assert len(speed_rows()) >= 3
    assert SPEED_HEADER not in README and '](docs/benchmarks.md)' in README


def test_every_speed_figure_is_its_raw_files():
    """Each row's teacher latency, speed-ups, date and torch version are those of the JSON it links; its code is a
    commit of this repository or says it was not recorded."""
    for row in speed_rows():
        machine, mode, teacher, two_f, all_l, date, code, stack, raw = row
        path = re.search(r'\((raw/[^)]+\.json)\)', raw).group(1)
        result = json.loads((DOCS_DIR / path).read_text())
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


def test_readme_status_line_is_the_speed_tables_gpu_row():
    """The README's one status line quotes the first GPU run of the default paths as the speed table has it."""
    rows = [r for r in speed_rows() if 'H200' in r[0] and 'default (fast) paths' in r[1]]
    assert rows, 'no H200 row of the default paths in docs/benchmarks.md'
    first = min(rows, key=lambda r: r[5])
    status = next(line for line in README.split('\n\n') if line.startswith('**Status ('))
    assert f'2F {first[3]}' in status and f'all-L {first[4]}' in status, status
    assert first[5][:10] in status, status


# ----------------------------------------------------------------------------- the demo's table (toy_reproduction)
def test_demo_table_is_its_raw_file():
    """docs/toy_reproduction.md's `make demo` table and the README's headline are the run's results.json."""
    page = (DOCS_DIR / 'toy_reproduction.md').read_text()
    result = json.loads(DEMO_RAW.read_text())
    rows = _table_rows(page, DEMO_HEADER)
    assert len(rows) == len(result['rows'])
    for (model, arch, miou, speedup), raw in zip(rows, result['rows']):
        assert arch == f"`{raw['arch']}`" and miou == f"{raw['mIoU']:.2f}", (model, raw)
        assert speedup == f"{raw['speedup']:.2f}x", (model, raw)
    by_tag = {r['tag']: r for r in result['rows']}
    teacher, hybrid = by_tag['teacher'], next(r for r in result['rows'] if r['arch'].count('F') == 2
                                              and r['clustering'] is None)
    prose = ' '.join(README.split())
    assert f"{hybrid['mIoU']:.2f} mIoU against the teacher's {teacher['mIoU']:.2f}" in prose
    assert f"{hybrid['speedup']:.2f}x faster" in prose


# ----------------------------------------------------------------------------- the 8-GPU estimates (pipeline.md)
def _estimates_module():
    spec = importlib.util.spec_from_file_location('real_data_estimates', REPO / 'scripts' / 'real_data_estimates.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wall_time_estimates_are_computed_from_the_configs_and_measurements():
    """docs/pipeline.md's 8-GPU table and docs/raw/real_data_estimates_8gpu.json are what the script computes now."""
    pipeline = (DOCS_DIR / 'pipeline.md').read_text()
    result = _estimates_module().report()
    assert '\n'.join(result['markdown']) in pipeline
    saved = json.loads((REPO / 'docs' / 'raw' / 'real_data_estimates_8gpu.json').read_text())
    assert saved['markdown'] == result['markdown'] and saved['stages'] == json.loads(json.dumps(result['stages']))
    assert 'estimates, not measurements' in pipeline


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
    for page in _pages():
        assert 'infer_compare.png' not in page.read_text(), page.name


# ----------------------------------------------------------------------------- inventories
def _layout_entry(name: str) -> str:
    text = (DOCS_DIR / 'architecture.md').read_text()
    block = text[text.index('## Layout'):]
    return re.search(rf'^{name}/\s+(.*?)(?=^\S)', block, re.S | re.M).group(1)


def test_tools_and_docs_listed_as_on_disk():
    tools = set(re.findall(r'([\w]+\.py)', _layout_entry('tools')))
    assert tools == {p.name for p in (REPO / 'tools').glob('*.py')}
    docs = set(re.findall(r'([\w]+\.md)', _layout_entry('docs')))
    assert docs == {p.name for p in (REPO / 'docs').glob('*.md')}


def test_benchmark_subcommands_listed():
    source = (REPO / 'tools' / 'benchmark.py').read_text()
    commands = set(re.findall(r"subcommand\(sub, '([\w-]+)'", source))
    assert {'models', 'mixers'} <= commands
    listed = re.search(r'`tools/benchmark.py` \(subcommands ([^)]*)\)', BENCHMARKS).group(1)
    assert set(re.findall(r'`([\w-]+)`', listed)) == commands


def test_registered_names_and_model_names_listed():
    import mmengine.registry as registries

    import jetvit_mm.mm  # noqa: F401  (registers)
    from jetvit_mm.models.variants import VARIANTS
    plugin = (DOCS_DIR / 'plugin.md').read_text()
    paragraph = plugin[plugin.index('Registered names'):plugin.index('a model JetViT cannot reproduce')]
    listed = set(re.findall(r'`(\w+)`', paragraph))
    ours = {name for reg in vars(registries).values() if isinstance(reg, registries.Registry)
            for name, cls in reg.module_dict.items() if getattr(cls, '__module__', '').startswith('jetvit_mm')}
    assert ours - listed == set(), 'registered but not in docs/plugin.md'
    assert set(VARIANTS) - listed == set(), 'model names not in docs/plugin.md'
