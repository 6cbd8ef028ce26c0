"""The documents' command blocks run as written: README.md and every page of docs/ (DOCS).

Every ```bash / ```sh block of these files carries a marker in the HTML comment right before its fence:
``<!-- doc-test: run NAME -->`` (the blocks of one NAME are one shell script, in document order: checked to chain,
and run at toy size), ``<!-- doc-test: static NAME -->`` (checked to chain, not run) or
``<!-- doc-test: skip: REASON -->``. "Chains": every path a command reads (a positional argument, an option's
value, a ``--cfg-options`` value, a ``$(cat ...)``) is a file of the repository, an input given by the user (an
absolute path or a variable), or lies under a path that an earlier command wrote (``--work-dir``, ``--out``,
``--out-dir``); every ``tools/train.py`` names its ``--work-dir``.
"""
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

from .conftest import HANG_GUARD_S, REPO

#: Every page whose blocks are checked: the README and each page of docs/ (docs/raw/ is the run history).
DOCS = ('README.md',) + tuple(sorted(f'docs/{p.name}' for p in (REPO / 'docs').glob('*.md')))
#: The blocks the README held before issue 47 moved most of them to docs/: (marker kind, the block's first line).
#: Each must still be a block of a page in DOCS with the same kind of marker (run and static blocks run / chain as
#: before; tests below name the pages they are on).
FORMER_README_BLOCKS: Tuple[Tuple[str, str], ...] = (
    ('skip', 'make demo   # installs into .venv (first time ~10 min: mmcv is compiled once), then runs the main job'),
    ('static', 'python tools/pipeline.py configs/jetvit/dinov3_base_cityscapes.py --work-dir work_dirs/cityscapes_b '
               '\\'),
    ('run', 'T=/ckpts/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth   # official, timm or Hugging Face format'),
    ('skip', 'python tools/infer.py HYBRID.pth img.png folder/ --out-dir out/                 '
             '# <name>_seg.png, <name>_overlay.png'),
    ('skip', 'python tools/export_onnx.py CONFIG CHECKPOINT --out model.onnx   # checked in onnxruntime against torch'),
    ('skip', '.venv/bin/python tools/benchmark.py models --model dinov3_vitb16 --arch teacher --arch 2F '
             '--arch all-L \\'),
)
#: The run / static scripts the tests below name: the step-by-step blocks of docs/pipeline.md.
SHORT_STEPS = ('docs/pipeline.md', 'short-steps')
SEG_STEPS = ('docs/pipeline.md', 'seg-steps')
DEPTH_STEPS = ('docs/pipeline.md', 'depth-steps')
MARKER = re.compile(r'^<!--\s*doc-test:\s*(run|static|skip)\b:?\s*(.*?)\s*-->$')
FENCE = re.compile(r'^```(bash|sh)\s*$')

#: The one table of what the toy-size run changes in the documented text: (documented, run instead). Applied in
#: this order; ``{teacher}`` and ``{data}`` are the generated tiny teacher checkpoint and data root.
SUBSTITUTIONS: Tuple[Tuple[str, str], ...] = (
    ('torchrun --nproc_per_node=8 ', 'python '),  # 8 GPUs -> one process
    (' --launcher pytorch', ''),
    ('configs/probe/dinov3_base_linear_cityscapes.py', 'tests/configs/docs_probe_tiny_cityscapes.py'),
    ('configs/jetvit/dinov3_base_cityscapes_step2.py', 'tests/configs/docs_distill_tiny_cityscapes_step2.py'),
    ('configs/jetvit/dinov3_base_cityscapes.py', 'tests/configs/docs_distill_tiny_cityscapes.py'),
    ('/ckpts/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth', '{teacher}'),  # DINOv3-B -> the tiny teacher
    ('/data/cityscapes', '{data}'),  # Cityscapes -> generated context-task data in its layout
)
#: Options whose value is a path the command writes.
WRITES = ('--work-dir', '--out', '--out-dir')
#: Tools whose positional arguments past the first are outputs (convert_depth_anything.py IN OUT).
POSITIONAL_OUTPUTS = {'tools/convert_depth_anything.py': 1}


@dataclass
class Block:
    """One fenced shell block of a document and its marker."""
    doc: str
    line: int
    kind: str  # run, static, skip or '' (no marker)
    name: str
    text: str


def doc_blocks(doc: str, text: str) -> List[Block]:
    """The ```bash / ```sh blocks of ``text`` with the marker on the line before each fence."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            previous = lines[i - 1].strip() if i else ''
            marker = MARKER.match(previous)
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith('```'))
            blocks.append(Block(doc, i + 1, marker.group(1) if marker else '', marker.group(2) if marker else '',
                                '\n'.join(lines[i + 1:end]) + '\n'))
            i = end
        i += 1
    return blocks


def all_blocks() -> List[Block]:
    return [b for doc in DOCS for b in doc_blocks(doc, (REPO / doc).read_text())]


def scripts(blocks: Sequence[Block], kinds=('run', 'static')) -> Dict[Tuple[str, str], str]:
    """``(doc, name) -> text``: the marked blocks of each name joined in document order."""
    out: Dict[Tuple[str, str], str] = {}
    for b in blocks:
        if b.kind in kinds:
            out[(b.doc, b.name)] = out.get((b.doc, b.name), '') + b.text
    return out


def _commands(text: str) -> List[str]:
    """The script's commands: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r'\\\n', ' ', text)
    return [c for c in (re.sub(r'(^|\s)#.*$', '', line).strip() for line in joined.splitlines()) if c]


def _path_like(token: str) -> bool:
    return '/' in token and not token.startswith(('/', '$', '-', 'http')) and '=' not in token


def _exists_in_repo(path: str) -> bool:
    """A repository file; a variable in it (a loop's ``$set``) matches anything."""
    pattern = re.sub(r'\$\{?\w+\}?', '*', path)
    return any(REPO.glob(pattern)) if '*' in pattern else (REPO / pattern).exists()


def chain_errors(text: str) -> List[str]:
    """What does not chain in a shell script of documented commands (empty: it chains)."""
    errors, written = [], []
    for n, command in enumerate(_commands(text), 1):
        reads = re.findall(r'\$\(cat ([^)\s]+)\)', command)
        tokens = re.sub(r'\$\(cat [^)]*\)', '', command).split()
        if 'tools/train.py' in tokens and '--work-dir' not in tokens:
            errors.append(f'command {n} ({command[:60]}...): tools/train.py without --work-dir')
        outputs = [tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t in WRITES]
        tool = next((t for t in tokens if t.startswith('tools/')), None)
        if tool in POSITIONAL_OUTPUTS:
            positional = [t for t in tokens[tokens.index(tool) + 1:] if not t.startswith('-')]
            outputs += positional[POSITIONAL_OUTPUTS[tool]:POSITIONAL_OUTPUTS[tool] + 1]
        for i, token in enumerate(tokens):
            value = token.split('=', 1)[1] if re.match(r'^[\w.]+=', token) else token
            if (i and tokens[i - 1] in WRITES) or value in outputs:
                continue
            if '<' in value or '>' in value:
                errors.append(f'command {n}: placeholder {value!r} is not a path a shell can run')
            elif _path_like(value):
                reads.append(value)
        for path in reads:
            if not (_exists_in_repo(path) or any(path == w or path.startswith(w.rstrip('/') + '/') for w in written)):
                errors.append(f'command {n} ({command[:60]}...) reads {path}, which is neither a repository file '
                              f'nor under a path an earlier command wrote ({written or "none"})')
        written += outputs
    return errors


def drop_first_work_dir(text: str) -> str:
    """``text`` with the first ``--work-dir X`` removed (what the issue found in the docs)."""
    return re.sub(r'\s--work-dir \S+', '', text, count=1)


# ----------------------------------------------------------------------------- static
def test_every_shell_block_is_marked():
    unmarked = [f'{b.doc}:{b.line}' for b in all_blocks() if not b.kind]
    assert not unmarked, (f'shell blocks without a <!-- doc-test: run NAME | static NAME | skip: REASON --> line '
                          f'before the fence: {unmarked}')
    assert all(b.name for b in all_blocks()), 'every marker names its script (run / static) or its reason (skip)'


def test_every_docs_page_is_checked():
    """Each page of docs/ and the README is in DOCS, so no page's commands go unchecked."""
    pages = {'README.md'} | {f'docs/{p.name}' for p in (REPO / 'docs').glob('*.md')}
    assert pages == set(DOCS)


def test_former_readme_blocks_still_marked():
    """Every command block the README held before its split is a block of a DOCS page with the same marker kind."""
    blocks = all_blocks()
    for kind, first in FORMER_README_BLOCKS:
        found = [b for b in blocks if b.text.splitlines()[0].rstrip() == first]
        assert found, f'no block in {DOCS} starts with {first!r}'
        assert any(b.kind == kind for b in found), f'{first!r}: marked {[b.kind for b in found]}, was {kind}'


def test_documented_chains_hold():
    found = scripts(all_blocks())
    assert {SHORT_STEPS, SEG_STEPS, DEPTH_STEPS, ('README.md', 'readme_one_command')} <= set(found)
    for (doc, name), text in found.items():
        assert chain_errors(text) == [], f'{doc}, {name}'


@pytest.mark.parametrize('key', [SHORT_STEPS, SEG_STEPS, DEPTH_STEPS], ids=['short', 'pipeline', 'depth'])
def test_a_removed_work_dir_breaks_the_chain(key):
    text = scripts(all_blocks())[key]
    assert chain_errors(text) == []
    errors = chain_errors(drop_first_work_dir(text))
    assert any('without --work-dir' in e for e in errors) and any('reads ' in e for e in errors), errors


def test_no_training_checkpoint_named_by_iteration():
    """A documented command reads the run's ``last_checkpoint``, not an ``iter_N.pth`` that depends on the schedule."""
    for b in all_blocks():
        if b.kind != 'skip':
            assert not re.search(r'iter_\d+\.pth', b.text), f'{b.doc}:{b.line}'
    for doc in DOCS:
        assert 'iter_40000' not in (REPO / doc).read_text(), doc


def test_substitutions_apply():
    """Every row of the table changes the text it is run on (a stale row would silently test nothing)."""
    text = ''.join(scripts(all_blocks(), kinds=('run',)).values())
    for documented, _ in SUBSTITUTIONS:
        assert documented in text, documented


# ----------------------------------------------------------------------------- run at toy size
def toy_script(text: str, teacher: Path, data: Path) -> str:
    for documented, instead in SUBSTITUTIONS:
        text = text.replace(documented, instead.format(teacher=teacher, data=data))
    return 'set -euo pipefail\n' + text


@pytest.fixture(scope='module')
def toy_inputs(tmp_path_factory) -> Tuple[Path, Path]:
    from jetvit_mm.demo.context_seg import make_context_seg

    from .test_supernet import make_teacher_checkpoint
    root = tmp_path_factory.mktemp('docs_inputs')
    return make_teacher_checkpoint(root / 'teacher.pth'), make_context_seg(root / 'data', splits={'train': 4,
                                                                                                  'val': 2}, seed=0)


@pytest.mark.parametrize('key', [SHORT_STEPS, SEG_STEPS], ids=['short', 'pipeline'])
@pytest.mark.integration
def test_segmentation_chain_runs_as_written(key, toy_inputs, tmp_path):
    teacher, data = toy_inputs
    for name in ('tools', 'configs', 'tests'):
        (tmp_path / name).symlink_to(REPO / name)
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'python').write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # the documented `python`
    (bin_dir / 'python').chmod(0o755)
    script = tmp_path / 'steps.sh'
    script.write_text(toy_script(scripts(all_blocks(), kinds=('run',))[key], teacher, data))
    env = {**os.environ, 'PATH': f'{bin_dir}{os.pathsep}{os.environ["PATH"]}', 'PYTHONPATH': str(REPO),
           'OMP_NUM_THREADS': '1', 'PYTHONUNBUFFERED': '1'}
    proc = subprocess.run(['bash', str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode == 0, f'{key} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}'
    work = 'wd' if key == SHORT_STEPS else 'work_dirs'
    arch = (tmp_path / work / 'search' / 'best_arch_step2.txt').read_text().strip()
    assert len(arch) == 4 and set(arch) <= set('LWF')
    assert (tmp_path / work / 'probe_hybrid' / 'last_checkpoint').is_file()
