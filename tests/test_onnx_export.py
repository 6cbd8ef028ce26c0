"""ONNX export with dynamic batch, height and width: onnxruntime on the CPU matches torch (fp32, 1e-4 relative) at
two grids and two batches other than the export's, for every mixer letter and both teacher families, with and
without the heads (linear probe, DPT depth, detection neck); the export formulations equal the eager ones; the
TorchScript exporter is refused with an error naming the one that works; non-finite outputs fail the check, the
output path is tried before the export and written atomically."""
import os
from pathlib import Path

import pytest
import torch

from jetvit_mm.deploy import ExportModule, export_onnx, onnx_session, run_onnx
from jetvit_mm.models import JetViT
from jetvit_mm.models.mixers import default_mixers

from .conftest import REPO, run_tool

pytest.importorskip('onnxruntime', reason='the deploy extra: pip install -e .[deploy]')

EXPORT_GRID, EXPORT_BATCH = (5, 7), 2
CHECKS = [((3, 5), 1), ((7, 2), 3)]  # (grid, batch): other grids (one smaller than a W window) and batches
TINY = dict(embed_dim=32, depth=4, num_heads=2, mixers=default_mixers(W=dict(window_size=4)))


def perturbed(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """``module`` with every parameter moved off its init (the L kernel generators start at zero)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return module.eval()


def assert_matches(module: torch.nn.Module, session, patch: int) -> None:
    for (rows, cols), batch in CHECKS:
        image = torch.randn(batch, 3, rows * patch, cols * patch)
        with torch.no_grad():
            expected = module(image)
        got = run_onnx(session, image)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == e.shape
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4 * float(e.abs().max()))


@pytest.mark.integration
@pytest.mark.parametrize('model_name', ['dinov3_vits16', 'dinov2_vits14'])
def test_every_mixer_letter_exports_with_a_dynamic_batch_and_grid(model_name, tmp_path):
    backbone = perturbed(JetViT(model_name=model_name, arch='LWFL', out_indices=(1, 3), **TINY))
    module = ExportModule(backbone).eval()
    path = export_onnx(module, tmp_path / 'backbone.onnx', backbone.patch_size, EXPORT_GRID, EXPORT_BATCH)
    assert_matches(module, onnx_session(path), backbone.patch_size)


@pytest.mark.integration
@pytest.mark.parametrize('config', ['seg_linear_probe_tiny_cityscapes.py', 'depth_eval_tiny_nyu.py',
                                    'det_mask_rcnn_tiny_coco.py'])
def test_heads_export_with_the_backbone(config, tmp_path):
    from jetvit_mm.mm.apis.onnx_model import build_export_module

    module, patch = build_export_module(str(REPO / 'tests' / 'configs' / config), None, 'model')
    perturbed(module)
    assert module.head is not None
    path = export_onnx(module, tmp_path / 'model.onnx', patch, EXPORT_GRID, EXPORT_BATCH)
    assert_matches(module, onnx_session(path), patch)


@pytest.mark.integration
def test_export_tool_writes_and_checks_the_model(tmp_path):
    proc = run_tool('export_onnx.py', REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py', '--out',
                    tmp_path / 'probe.onnx')
    assert (tmp_path / 'probe.onnx').is_file()
    assert 'onnxruntime vs torch' in proc.stdout and 'max relative difference' in proc.stdout, proc.stdout


def test_torchscript_exporter_is_refused_with_the_working_one_named(tmp_path):
    model = JetViT(model_name='dinov3_vits16', arch='LWF', **{**TINY, 'depth': 3}).eval()
    with pytest.raises(RuntimeError, match=r'dynamo=True'):
        torch.onnx.export(model, (torch.randn(1, 3, 32, 48),), str(tmp_path / 'legacy.onnx'), dynamo=False)


# ------------------------------------------------------------------ the export formulations equal the eager ones
def test_exportable_squeeze_conv_equals_the_grouped_conv():
    from jetvit_mm.models.mixers.squeeze_conv import SqueezeDynamicConv, per_image_depthwise_conv

    conv = perturbed(SqueezeDynamicConv(16, kernel_size=3))
    v = torch.randn(3, 16, 5, 7)
    kernels = conv.fc2(conv.act(conv.fc1(v.mean(dim=(2, 3))))).reshape(3, 16, 3, 3)
    with torch.no_grad():
        torch.testing.assert_close(per_image_depthwise_conv(v, kernels), conv(v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('grid', [(3, 5), (7, 2), (14, 14)])
def test_rope_and_pos_embed_from_the_grid_equal_the_eager_ones(grid):
    from jetvit_mm.models.pos_embed import _resize_pos_embed_traceable, resize_pos_embed
    from jetvit_mm.models.rope_grid import rope_embed_for_grid

    dinov3 = JetViT(model_name='dinov3_vits16', arch='FF', **{**TINY, 'depth': 2}).eval()
    torch.testing.assert_close(rope_embed_for_grid(dinov3.rope, grid), dinov3.rope.get_embed(shape=list(grid)),
                               rtol=0, atol=0)
    pos_embed = torch.randn(1, 1 + 14 * 14, 32)
    for mode in ('dinov2', 'hf'):
        torch.testing.assert_close(_resize_pos_embed_traceable(pos_embed, grid, 1, 14, mode),
                                   resize_pos_embed(pos_embed, grid, 1, mode), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('grid', [(3, 5), (8, 8), (9, 2)])
def test_masked_window_attention_equals_the_windowed_one(grid):
    from jetvit_mm.models.mixers.window import window_attention
    from jetvit_mm.models.mixers.window_export import masked_window_attention

    h, w = grid
    P, heads, D = 5, 2, 16
    qkv = torch.randn(2, P + h * w, 3 * D)
    window = (min(4, h), min(4, w))
    torch.testing.assert_close(masked_window_attention(qkv, grid, 4, heads, P),
                               window_attention(qkv, grid, window, heads, P), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('grid,prefix', [((5, 7), 5), ((8, 8), 0), ((3, 9), 1), ((10, 14), 5)])
@pytest.mark.parametrize('rotate_half', [True, False])
def test_fixed_grid_window_attention_equals_the_windowed_one(grid, prefix, rotate_half):
    """The fixed-size export's W formulation (own projections, token-major RoPE, windows by one transpose each) on
    grids a multiple of the window, padded ones and a side shorter than the window, both RoPE layouts."""
    from jetvit_mm.models.mixers.window import WindowAttention, window_attention
    from jetvit_mm.models.mixers.window_export import fixed_grid_window_attention

    mixer = perturbed(WindowAttention(32, 2, num_prefix_tokens=prefix, window_size=4, rotate_half=rotate_half))
    x, rope = torch.randn(2, prefix + grid[0] * grid[1], 32), torch.randn(grid[0] * grid[1], 32)
    window = (min(4, grid[0]), min(4, grid[1]))
    with torch.no_grad():
        got = fixed_grid_window_attention(*mixer.projections(x), grid, window, 2, prefix, rope, rotate_half)
        expected = window_attention(mixer.qkv(x), grid, window, 2, prefix, rope, rotate_half)
        unrotated = window_attention(mixer.qkv(x), grid, window, 2, prefix, None, rotate_half)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(expected, unrotated, atol=1e-3)  # RoPE changes the result: it was applied


@pytest.mark.parametrize('conv', ['squeeze', 'static', 'token', 'none'])
@pytest.mark.parametrize('prefix', [0, 1, 5])
def test_exported_linear_attention_equals_the_torch_path(conv, prefix):
    """The L layer's export formulation (own projections, a padded add of the conv term) against its torch path,
    with RoPE in the numerator; and the F layer's export heads against the split of one qkv output."""
    from jetvit_mm.models.mixers.full import FullAttention
    from jetvit_mm.models.mixers.linear import LinearAttention

    mixer = perturbed(LinearAttention(32, 2, num_prefix_tokens=prefix, conv=conv))
    grid = (5, 7)
    x, rope = torch.randn(2, prefix + 35, 32), torch.randn(35, 32)
    with torch.no_grad():
        torch.testing.assert_close(mixer.exported_attend(x, grid, rope),
                                   mixer.attend(mixer.qkv(x), grid, rope, 'torch', x.dtype), rtol=1e-5, atol=1e-6)
        full = FullAttention(32, 2, num_prefix_tokens=prefix)
        q, k, v = (t.transpose(1, 2).reshape(2, -1, 32) for t in full.heads(x))
        torch.testing.assert_close(torch.cat(full.projections(x), dim=-1), torch.cat([q, k, v], dim=-1))


@pytest.mark.integration
def test_benchmark_times_onnxruntime_beside_torch_in_one_round_robin(monkeypatch, tmp_path):
    """The sessions are timed beside torch, and the exported files they were built from are gone once they are built
    (a 1024x2048 benchmark left 1.1 GB of them in the temporary folder per run)."""
    import tempfile

    import jetvit_mm.benchmark.models as model_bench
    from jetvit_mm.benchmark.models import benchmark_models, jetvit_kwargs, model_entries

    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    rounds = []
    timed = model_bench.time_interleaved
    monkeypatch.setattr(model_bench, 'time_interleaved',
                        lambda calls, *a, **k: rounds.append(list(calls)) or timed(calls, *a, **k))
    kwargs = jetvit_kwargs({'model_name': 'dinov3_vits16', 'depth': 3, 'embed_dim': 32, 'num_heads': 2}, 'unused',
                           window=2)
    result = benchmark_models(model_entries(kwargs, ['LWF']), sizes=[(32, 64), (48, 32)], memory=False,
                              profile=False, warmup=0, repeat=2, batch=1, dtype='fp32', device='cpu',
                              compile_model=False, cuda_graph=False, throughput=None, threads=1, malloc='system',
                              malloc_kept=False, onnxruntime=True)
    labels = ['teacher', 'LWF', 'teacher (onnxruntime)', 'LWF (onnxruntime)']
    assert sorted(rounds[0]) == sorted(f'{size} {label}' for size in ('32x64', '48x32') for label in labels)
    rows = {(r['size'], r['label']): r for r in result['rows']}
    for size in ('32x64', '48x32'):
        ort = rows[(size, 'LWF (onnxruntime)')]
        assert ort['runtime'] == 'onnxruntime' and ort['median_ms'] > 0
        assert ort['speedup'] == pytest.approx(rows[(size, 'teacher')]['median_ms'] / ort['median_ms'])
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ non-finite outputs, the output path
def test_non_finite_outputs_fail_the_check_naming_the_output():
    """A NaN difference passes every tolerance: NaN or inf on either side is refused, naming the output."""
    from jetvit_mm.deploy import compare_outputs

    torch_out = [torch.ones(2, 3), torch.full((4, ), 2.)]
    assert compare_outputs([t.clone() for t in torch_out], torch_out) == 0
    assert compare_outputs([torch_out[0], torch.full((4, ), 2.5)], torch_out) == pytest.approx(0.25)
    nan = [torch_out[0], torch.tensor([2., float('nan'), 2., 2.])]
    with pytest.raises(ValueError, match=r'output1: the onnxruntime output holds 1 non-finite value'):
        compare_outputs(nan, torch_out)
    inf = [torch.tensor([[1., float('inf'), 1.], [1., 1., -float('inf')]]), torch_out[1]]
    with pytest.raises(ValueError, match=r'features: the torch output holds 2 non-finite value'):
        compare_outputs(torch_out, inf, names=['features', 'logits'])


@pytest.mark.integration
def test_export_tool_refuses_a_model_with_nan_outputs_before_writing(tmp_path):
    from mmengine.config import Config
    from mmseg.apis import init_model

    import jetvit_mm.mm  # noqa: F401

    config = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
    state = init_model(Config.fromfile(config), None, device='cpu').state_dict()
    head = next(k for k in state if k.startswith('decode_head.') and k.endswith('weight'))
    state[head] = torch.full_like(state[head], float('nan'))
    torch.save({'state_dict': state, 'meta': {}}, tmp_path / 'nan.pth')
    proc = run_tool('export_onnx.py', config, tmp_path / 'nan.pth', '--out', tmp_path / 'probe.onnx', check=False)
    assert proc.returncode != 0 and 'output0: the torch output holds' in proc.stderr, proc.stderr[-2000:]
    assert 'non-finite' in proc.stderr and not (tmp_path / 'probe.onnx').exists()


def test_an_unwritable_output_is_refused_before_the_export(tmp_path, monkeypatch):
    """The path is tried by writing a file there (root passes os.access on a folder it cannot write into): a folder
    in the way, or a folder that takes no files (/proc), fails before anything is traced."""
    traced = []
    export = torch.onnx.export
    monkeypatch.setattr(torch.onnx, 'export', lambda *a, **k: traced.append(1) or export(*a, **k))
    module = ExportModule(JetViT(model_name='dinov3_vits16', arch='LWF', **{**TINY, 'depth': 3})).eval()
    folder = tmp_path / 'model.onnx'
    folder.mkdir()
    cases = [(folder, rf'{folder} is a folder')]
    if os.path.isdir('/proc/self'):  # Linux
        cases.append((Path('/proc/jetvit_export_probe.onnx'), r'jetvit_export_probe\.onnx cannot be written'))
    for path, message in cases:
        with pytest.raises(ValueError, match=message):
            export_onnx(module, path, 16)
    assert not traced and [p.name for p in tmp_path.iterdir()] == ['model.onnx']


def test_a_failed_save_leaves_the_previous_file_and_no_partial_one(tmp_path, monkeypatch):
    """The .onnx is written beside its path and renamed onto it: a save that fails midway (a full disk, simulated
    as the file half written) leaves the previous export as it was and nothing else."""
    module = ExportModule(JetViT(model_name='dinov3_vits16', arch='LWF', **{**TINY, 'depth': 3})).eval()
    path = tmp_path / 'model.onnx'
    path.write_bytes(b'the previous export')

    def disk_full(self, destination, **kwargs):
        Path(destination).write_bytes(b'half a model')
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(torch.onnx.ONNXProgram, 'save', disk_full)
    with pytest.raises(OSError, match='No space left on device'):
        export_onnx(module, path, 16)
    assert path.read_bytes() == b'the previous export' and [p.name for p in tmp_path.iterdir()] == ['model.onnx']


# ------------------------------------------------------------------ the deployment export at a fixed size
def softmax_widths(path: Path) -> list:
    """The static last dimension of every Softmax's input in the ONNX graph at ``path`` (the keys each query sees)."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    shapes = {v.name: v.type.tensor_type.shape for v in list(model.graph.value_info) + list(model.graph.output)}
    widths = []
    for node in model.graph.node:
        if node.op_type == 'Softmax':
            dims = shapes[node.input[0]].dim
            widths.append(dims[-1].dim_value if dims[-1].HasField('dim_value') else None)
    return widths


def grouped_convs(path) -> list:
    """The group counts of the graph's grouped Conv nodes (group > 1)."""
    import onnx

    groups = [next((a.i for a in node.attribute if a.name == 'group'), 1)
              for node in onnx.load(str(path)).graph.node if node.op_type == 'Conv']
    return [g for g in groups if g > 1]


@pytest.mark.integration
def test_fixed_size_export_keeps_the_windows_and_matches_torch(tmp_path):
    """At a fixed input shape the W layers are exported windowed (their softmax runs over a window's keys and the
    prefix, not over all tokens) and each squeeze conv is one grouped conv over batch x channels; onnxruntime matches
    torch at that shape, on a grid larger than the window whose windows need padding, and refuses another batch."""
    backbone = perturbed(JetViT(model_name='dinov3_vits16', arch='WLFW', out_indices=(1, 3), **TINY))
    module = ExportModule(backbone).eval()
    grid, prefix, batch = (10, 14), backbone.num_prefix_tokens, 3  # 3 x 4 windows of 4 x 4, the last ones padded
    fixed = export_onnx(module, tmp_path / 'fixed.onnx', 16, fixed_size=(16 * grid[0], 16 * grid[1]), batch=batch)
    session = onnx_session(fixed)
    image = torch.randn(batch, 3, 16 * grid[0], 16 * grid[1])
    with torch.no_grad():
        expected = module(image)
    for g, e in zip(run_onnx(session, image), expected):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4 * float(e.abs().max()))
    with pytest.raises(Exception, match=r'(?i)dimension'):  # the graph's batch is static
        run_onnx(session, image[:1])
    window_keys = 4 * 4 + prefix
    assert softmax_widths(fixed).count(window_keys) == 2  # each W layer's patch queries: their window and the prefix
    assert grouped_convs(fixed) == [batch * 32]  # the one L layer's squeeze conv: batch x channels groups
    dynamic = export_onnx(module, tmp_path / 'dynamic.onnx', 16)
    assert window_keys not in softmax_widths(dynamic)  # any size: W as masked full attention
    assert grouped_convs(dynamic) == []  # any batch: the squeeze conv as shifted products


def test_fixed_size_must_be_whole_patches(tmp_path):
    module = ExportModule(JetViT(model_name='dinov3_vits16', arch='W', **{**TINY, 'depth': 1})).eval()
    with pytest.raises(ValueError, match=r'multiples of the patch size 16'):
        export_onnx(module, tmp_path / 'x.onnx', 16, fixed_size=(100, 64))


@pytest.mark.integration
def test_export_tool_checks_at_the_fixed_size_and_above_the_window(tmp_path):
    config = REPO / 'tests' / 'configs' / 'seg_linear_probe_tiny_cityscapes.py'
    fixed = run_tool('export_onnx.py', config, '--out', tmp_path / 'fixed.onnx', '--fixed-size', 96, 160,
                     '--batch', 2)
    assert 'onnxruntime vs torch at 2x96x160' in fixed.stdout, fixed.stdout
    dynamic = run_tool('export_onnx.py', config, '--out', tmp_path / 'dynamic.onnx')
    size = dynamic.stdout.split('onnxruntime vs torch at 3x')[1].split(':')[0]
    rows, cols = (int(side) // 16 for side in size.split('x'))
    from mmengine.config import Config
    window = Config.fromfile(config).model.backbone.mixers.W.window_size
    assert rows > window and cols > window, (size, window)
