"""The training-free token-clustering baseline (jetvit_mm/models/token_reduction.py) on tiny models: nothing clustered
is the teacher bit for bit at every out_indices; clustered, the outputs the segmentation, depth and detection heads
read keep the teacher's shapes at every out_indices and are finite; the middle blocks really see fewer tokens; the
clusters' RoPE sits at their cells' centres; bad strengths are refused naming the field; every run is
deterministic."""
import pytest
import torch

from jetvit_mm.models import JetViT, JetViTDepthAnything, SimpleFeaturePyramid
from jetvit_mm.models.mixers import default_mixers
from jetvit_mm.models.token_reduction import (
    OFFSETS,
    ClusterSpec,
    TokenClusteringJetViT,
    apply_token_clustering,
    cluster_rope,
    cluster_tokens,
    neighbours,
    parse_cluster_spec,
    reconstruct,
    scatter_to_neighbours,
    to_cells,
)

TINY = dict(model_name='dinov3_vits16', embed_dim=32, depth=4, num_heads=2,
            mixers=default_mixers(W=dict(window_size=2)), out_indices=(0, 1, 2, 3))
DEPTH_TINY = dict(model_name='dinov2_vits14', embed_dim=32, depth=4, num_heads=2, out_indices=(0, 1, 2, 3),
                  features=16, out_channels=(8, 16, 32, 32))


@torch.no_grad()
def randomise_(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random and of order one (timm's LayerScale init of 1e-5 would hide the blocks)."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        scale = p[0].numel() ** -0.5 if p.dim() >= 2 else 0.5
        p.copy_(torch.randn(p.shape, generator=g) * scale + (1. if name.endswith('gamma') else 0.))
    return model.eval()


def pair(arch: str, clustering, seed: int = 0):
    """A teacher-weights JetViT and a TokenClusteringJetViT with the same weights."""
    teacher = randomise_(JetViT(arch=arch, **TINY), seed)
    clustered = TokenClusteringJetViT(arch=arch, clustering=clustering, **TINY).eval()
    clustered.load_state_dict(teacher.state_dict())
    return teacher, clustered


@pytest.mark.parametrize('clustering', [None, 'f1@0', 'f1@1-2'])
@pytest.mark.parametrize('arch', ['FFFF', 'LWFL'])
def test_nothing_clustered_is_the_teacher_exactly_at_every_out_index(arch, clustering):
    teacher, clustered = pair(arch, clustering)
    x = torch.randn(2, 3, 80, 112)
    with torch.no_grad():
        for fmt in ('NCHW', 'NLC'):
            ref = teacher.forward_intermediates(x, output_fmt=fmt, return_prefix_tokens=True)
            out = clustered.forward_intermediates(x, output_fmt=fmt, return_prefix_tokens=True)
            assert len(out) == len(ref) == 4
            for (patches, prefix), (ref_patches, ref_prefix) in zip(out, ref):
                assert torch.equal(patches, ref_patches) and torch.equal(prefix, ref_prefix)
        assert all(torch.equal(a, b) for a, b in zip(clustered(x), teacher(x)))
        assert torch.equal(clustered.forward_features(x), teacher.forward_features(x))


@pytest.mark.parametrize('clustering', ['f2@0', 'f2@1-2', 'f3@0-1'])
@pytest.mark.parametrize('arch', ['FFFF', 'LWFL'])
@pytest.mark.parametrize('size', [(80, 112), (48, 80)], ids=lambda s: f'{s[0]}x{s[1]}')
def test_clustered_outputs_have_the_teachers_shapes_at_every_out_index(arch, clustering, size):
    teacher, clustered = pair(arch, clustering)
    spec = clustered.clustering
    x = torch.randn(2, 3, *size)
    with torch.no_grad():
        for fmt in ('NCHW', 'NLC'):
            ref = teacher.forward_intermediates(x, output_fmt=fmt, return_prefix_tokens=True)
            out = clustered.forward_intermediates(x, output_fmt=fmt, return_prefix_tokens=True)
            for i, ((patches, prefix), (ref_patches, ref_prefix)) in enumerate(zip(out, ref)):
                assert patches.shape == ref_patches.shape and prefix.shape == ref_prefix.shape
                assert torch.isfinite(patches).all() and torch.isfinite(prefix).all()
                if i <= spec.after:  # before the clustering: the teacher's own outputs
                    assert torch.equal(patches, ref_patches)
                else:  # the clusters' work shows in the outputs (and stays close to the teacher's)
                    assert not torch.equal(patches, ref_patches)
        features = clustered.forward_features(x)
        assert features.shape == teacher.forward_features(x).shape and torch.isfinite(features).all()


def test_middle_blocks_run_on_the_clusters_and_the_prefix_tokens():
    _, clustered = pair('FLWF', 'f2@0-2')
    seen = []
    hooks = [b.register_forward_hook(lambda m, args, out: seen.append(args[0].shape[1])) for b in clustered.blocks]
    with torch.no_grad():
        clustered(torch.randn(1, 3, 80, 112))  # 5 x 7 patches -> 3 x 4 clusters (the last row and column padded)
    for h in hooks:
        h.remove()
    prefix = clustered.num_prefix_tokens
    assert seen == [prefix + 35, prefix + 12, prefix + 12, prefix + 35]


def test_segmentation_depth_and_detection_heads_read_clustered_outputs():
    torch.manual_seed(0)
    depth_teacher = randomise_(JetViTDepthAnything(**DEPTH_TINY))
    depth_clustered = JetViTDepthAnything(**DEPTH_TINY).eval()
    depth_clustered.load_state_dict(depth_teacher.state_dict())
    apply_token_clustering(depth_clustered.backbone, 'f2@0')
    x = torch.randn(1, 3, 70, 98)
    neck = SimpleFeaturePyramid(in_channels=32, out_channels=16, num_outs=5).eval()
    teacher, clustered = pair('FFFF', 'f2@1')
    with torch.no_grad():
        disparity, ref = depth_clustered(x), depth_teacher(x)
        assert disparity.shape == ref.shape and torch.isfinite(disparity).all()
        assert not torch.equal(disparity, ref)
        image = torch.randn(1, 3, 64, 96)
        pyramid, ref_pyramid = neck(clustered(image)[-1:]), neck(teacher(image)[-1:])
    assert [p.shape for p in pyramid] == [p.shape for p in ref_pyramid]
    assert all(torch.isfinite(p).all() for p in pyramid)


def test_clusters_rope_is_the_centre_of_their_cells():
    model = JetViT(**TINY).eval()
    # a grid the factor divides: the clusters sit exactly on the coarse grid's patch centres
    rope = cluster_rope(model.rope, (6, 8), 2, torch.zeros(1))
    torch.testing.assert_close(rope, model.rope_embed((3, 4)), rtol=0, atol=1e-6)
    # padded cells: the mean position of the tokens they hold (cell (2, 0) of 5 x 8 patches: row 4, columns 0-1)
    rope = cluster_rope(model.rope, (5, 8), 2, torch.zeros(1))
    assert rope.shape == (3 * 4, model.rope_embed((5, 8)).shape[-1])
    sin, cos = model.rope._get_pos_embed_from_coords(torch.tensor([[4.5 / 5 * 2 - 1, 1 / 8 * 2 - 1]]))
    torch.testing.assert_close(rope.reshape(3, 4, -1)[2, 0], torch.cat([sin, cos], dim=-1)[0], rtol=0, atol=1e-6)


def test_reconstruction_is_the_tokens_when_the_clusters_did_not_change():
    torch.manual_seed(0)
    tokens, grid = torch.randn(2, 5 * 7, 16), (5, 7)
    centres, assignment, cgrid = cluster_tokens(tokens, grid, factor=2, iters=3, temperature=0.1)
    assert cgrid == (3, 4) and centres.shape == (2, 3, 4, 16)
    torch.testing.assert_close(assignment.sum(-1), to_cells(torch.ones(2, 35, 1), grid, 2)[..., 0])  # padding: 0
    from jetvit_mm.models.token_reduction import Clustering
    state = Clustering(assignment, centres, tokens, grid, cgrid, 2, None)
    assert torch.equal(reconstruct(state, centres.flatten(1, 2)), tokens)
    shifted = reconstruct(state, centres.flatten(1, 2) + 1.)  # every cluster moved by 1: so does every token
    torch.testing.assert_close(shifted, tokens + 1.)


def test_neighbourhoods_and_their_transpose():
    torch.manual_seed(0)
    centres = torch.randn(2, 3, 4, 5)
    nb = neighbours(centres)
    for k, (dy, dx) in enumerate(OFFSETS):
        for y in range(3):
            for x in range(4):
                inside = 0 <= y + dy < 3 and 0 <= x + dx < 4
                expected = centres[:, y + dy, x + dx] if inside else torch.zeros(2, 5)
                assert torch.equal(nb[:, y, x, k], expected)
    values = torch.randn(2, 3, 4, 9, 5)  # <neighbours(c), v> == <c, scatter(v)>: the adjoint
    torch.testing.assert_close((nb * values).sum(), (centres * scatter_to_neighbours(values)).sum())


def test_constant_cells_cluster_to_their_value():
    cells = torch.arange(12.).reshape(1, 3, 4, 1, 1).expand(1, 3, 4, 4, 3) + 1.  # one value per 2 x 2 cell
    tokens = cells.reshape(1, 3, 4, 2, 2, 3).permute(0, 1, 3, 2, 4, 5).reshape(1, 6 * 8, 3)
    assert torch.equal(to_cells(tokens, (6, 8), 2), cells)
    centres, _, _ = cluster_tokens(tokens, (6, 8), 2, iters=0, temperature=0.1)
    assert torch.equal(centres, cells[:, :, :, 0])


@pytest.mark.parametrize('spec, message', [
    ('f0@1', 'factor must be an integer >= 1'),
    ('f2@3', 'after=3: must be a block index in 0..2'),
    ('f2@2-1', 'until=1: must be a block index in 3..3'),
    ('f2@1-4', 'until=4'),
    ('2@1', 'expected f<FACTOR>@<AFTER>'),
    ('r0.5@L2', 'expected f<FACTOR>@<AFTER>'),
    (dict(factor=2), 'factor/after missing'),
    (dict(factor=2, after=0, strength=3), "unknown keys \\['strength'\\]"),
    (dict(factor=2, after=0, temperature=0.), 'temperature must be a finite number > 0'),
    (dict(factor=2, after=0, temperature=float('nan')), 'temperature must be a finite number > 0'),
    (dict(factor=2, after=0, iters=-1), 'iters must be an integer >= 0'),
    (dict(factor=2.5, after=0), 'factor must be an integer >= 1'),
    (0.5, 'must be a string'),
])
def test_bad_strengths_are_refused_naming_the_field(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_cluster_spec(spec, depth=4)
    with pytest.raises(ValueError, match=message):
        TokenClusteringJetViT(clustering=spec, **TINY)


def test_spec_forms_and_apply_checks_the_model():
    assert parse_cluster_spec('f2@1-2', 4) == ClusterSpec(2, 1, 2) == parse_cluster_spec(dict(factor=2, after=1,
                                                                                                 until=2), 4)
    assert parse_cluster_spec(' f4@0 ', 4).text == 'f4@0'
    with pytest.raises(TypeError, match='takes a jetvit_mm.models.JetViT, got Linear'):
        apply_token_clustering(torch.nn.Linear(2, 2), 'f2@0')


def test_clustering_is_deterministic():
    _, first = pair('LWFL', 'f2@0', seed=3)
    _, second = pair('LWFL', 'f2@0', seed=3)
    x = torch.randn(2, 3, 80, 112)
    with torch.no_grad():
        a, b, c = first(x), first(x), second(x)
    assert all(torch.equal(p, q) and torch.equal(p, r) for p, q, r in zip(a, b, c))


@pytest.mark.parametrize('temperature', [1e-300, 1e-39])
def test_a_temperature_below_the_dtype_range_is_refused_naming_the_limit(temperature):
    """Finite and > 0, but below fp32's smallest normal number: the similarities over it overflow (all-NaN features
    before), so it is refused at construction, naming the limit; float64 weights take it, and compute finite."""
    spec = dict(factor=2, after=0, temperature=temperature)
    limit = r'at least 1\.1754943508222875e-38 \(torch\.finfo\(torch\.float32\)\.tiny\)'
    with pytest.raises(ValueError, match=limit):
        TokenClusteringJetViT(clustering=spec, **TINY)
    with pytest.raises(ValueError, match=limit):
        apply_token_clustering(JetViT(**TINY), spec)
    teacher, clustered = pair('LWFL', None)
    clustered.double().set_clustering(spec)
    with torch.no_grad():
        assert all(torch.isfinite(out).all() for out in clustered(torch.randn(1, 3, 80, 112, dtype=torch.float64)))


def test_the_temperature_limit_is_the_compute_dtypes_and_features_are_finite_at_it():
    tokens = torch.randn(1, 5 * 7, 8)
    with pytest.raises(ValueError, match=r'at least 6\.1035.*e-05 \(torch\.finfo\(torch\.float16\)\.tiny\)'):
        cluster_tokens(tokens.half(), (5, 7), 2, iters=1, temperature=1e-5)  # fine in fp32, not in fp16
    tiny = torch.finfo(torch.float32).tiny
    _, clustered = pair('LWFL', dict(factor=2, after=0, temperature=tiny))
    with torch.no_grad():
        assert all(torch.isfinite(out).all() for out in clustered(torch.randn(1, 3, 80, 112)))


@pytest.mark.parametrize('factor', [8, 100_000])
def test_a_factor_larger_than_the_patch_grid_is_refused_naming_the_grid(factor):
    """80x112 images are a 5x7 grid of patches: a factor of 7 makes one cluster, a larger one only pads (a huge one
    tried to allocate terabytes before)."""
    _, clustered = pair('LWFL', f'f{factor}@0')
    x = torch.randn(1, 3, 80, 112)
    with torch.no_grad(), pytest.raises(ValueError, match=f'factor {factor} is larger than this input\'s patch grid '
                                                          '5x7: it must be at most 7'):
        clustered(x)
    clustered.set_clustering('f7@0')
    with torch.no_grad():
        assert all(torch.isfinite(out).all() for out in clustered(x))
