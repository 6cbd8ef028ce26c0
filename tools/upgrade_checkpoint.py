"""Convert a checkpoint of an old format once, so that its arch spec is in its state dict, the one place jetvit_mm
reads it from.

    python tools/upgrade_checkpoint.py OLD.pth NEW.pth

Old formats (each refused on load with a message naming this tool): a version-1 arch spec in the state dict (written
before the mixer table); an export that named its arch only in ``meta['jetvit_arch']`` (and ``meta['build_args']``);
a runner checkpoint without a spec whose saved config names the arch (read literal-only, never run), also with the
former ``window_size`` / ``linear_cfg`` / ``window_kernel`` arguments. Everything else in the file is kept; the
output gets a fresh tensor digest. The input is loaded safely (weights only). Prints what changed.
"""
import argparse
from pathlib import Path
from typing import List, Optional

from jetvit_mm.cli import check_inputs, check_outputs


def upgrade(src: Path, dst: Path) -> List[str]:
    """Write ``src`` converted to ``dst``; returns what changed (empty: ``src`` was already current, and ``dst`` is
    a copy of it)."""
    import jetvit_mm.mm  # noqa: F401  (runner checkpoints' extra pickled types)
    from jetvit_mm.mm.runner_checkpoint import RUNNER_PREFIXES, legacy_spec
    from jetvit_mm.models.checkpoints import save_checkpoint
    from jetvit_mm.models.checkpoints.io import _load_pth, _load_safetensors
    from jetvit_mm.models.checkpoints.legacy import upgrade_state

    if src.suffix == '.safetensors':
        from safetensors.torch import save_file

        state, changes = upgrade_state(_load_safetensors(src), {}, str(src))
        save_file({k: v.contiguous() for k, v in state.items()}, str(dst))
        return changes
    raw = _load_pth(src)
    nested = isinstance(raw, dict) and isinstance(raw.get('state_dict'), dict)
    state = raw['state_dict'] if nested else raw
    meta = raw.get('meta') if nested and isinstance(raw.get('meta'), dict) else {}
    found = {prefix: legacy_spec(meta, prefix.rstrip('.')) for prefix in RUNNER_PREFIXES
             if any(k.startswith(prefix) for k in state)}
    state, changes = upgrade_state(state, meta, str(src), {p: s for p, s in found.items() if s is not None})
    save_checkpoint(dict(raw, state_dict=state) if nested else dict(state_dict=state, meta={}), dst)
    return changes


def main(argv: Optional[List[str]] = None) -> List[str]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', type=Path, help='checkpoint of an old format (.pth or .safetensors)')
    parser.add_argument('dst', type=Path, help='where the converted checkpoint is written (same format)')
    args = parser.parse_args(argv)
    check_inputs(parser, args, ('src', ))
    check_outputs(parser, args, files=('dst', ))
    if args.src.resolve() == args.dst.resolve():
        parser.error('dst must differ from src (the old file is kept)')
    changes = upgrade(args.src, args.dst)
    print('\n'.join(changes) if changes else f'{args.src}: already current, copied unchanged')
    print(f'wrote {args.dst}')
    return changes


if __name__ == '__main__':
    main()
