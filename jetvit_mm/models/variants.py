"""The teacher ViTs JetViT starts from, as data: one entry per public model size."""
from dataclasses import dataclass
from typing import Dict, Tuple


@dataclass(frozen=True)
class ViTVariant:
    """A teacher family member: the timm definition it is built from and its default shapes."""

    timm_name: str
    family: str  # 'dinov3' (RoPE, 4 registers, patch 16) or 'dinov2' (abs. pos. embed, patch 14)
    embed_dim: int
    depth: int
    num_heads: int
    swiglu: bool = False

    @property
    def patch_size(self) -> int:
        return 16 if self.family == 'dinov3' else 14

    @property
    def default_out_indices(self) -> Tuple[int, ...]:
        """Last layer for DINOv3 probes; DepthAnythingV2's four tapped layers for DINOv2."""
        return self.out_indices_for(self.depth)

    def timm_kwargs(self, embed_dim: int) -> Dict[str, float]:
        """Extra timm arguments for a model ``embed_dim`` wide: DINOv2's fused SwiGLU has the official hidden width
        ``(int(4 D * 2/3) + 7) // 8 * 8`` (timm's fixed ratio gives it only at D=1536, and an odd width elsewhere)."""
        if self.family != 'dinov2' or not self.swiglu:
            return {}
        hidden = (int(4 * embed_dim * 2 / 3) + 7) // 8 * 8
        return dict(mlp_ratio=(2 * hidden + 0.5) / embed_dim)  # packed gate + value, int() lands on 2 * hidden

    def out_indices_for(self, depth: int) -> Tuple[int, ...]:
        """:attr:`default_out_indices` for a model of ``depth`` layers (e.g. a small test model)."""
        if self.family == 'dinov3':
            return (depth - 1, )
        return DEPTH_ANYTHING_LAYERS.get(depth, (depth - 1, ))


# DepthAnythingV2's tapped layers (0-based) by depth: S/B [2,5,8,11], L [4,11,17,23], G [9,19,29,39].
DEPTH_ANYTHING_LAYERS: Dict[int, Tuple[int, ...]] = {12: (2, 5, 8, 11), 24: (4, 11, 17, 23), 40: (9, 19, 29, 39)}

VARIANTS: Dict[str, ViTVariant] = {
    'dinov3_vits16': ViTVariant('vit_small_patch16_dinov3', 'dinov3', 384, 12, 6),
    'dinov3_vits16plus': ViTVariant('vit_small_plus_patch16_dinov3', 'dinov3', 384, 12, 6, swiglu=True),
    'dinov3_vitb16': ViTVariant('vit_base_patch16_dinov3', 'dinov3', 768, 12, 12),
    'dinov3_vitl16': ViTVariant('vit_large_patch16_dinov3', 'dinov3', 1024, 24, 16),
    'dinov3_vith16plus': ViTVariant('vit_huge_plus_patch16_dinov3', 'dinov3', 1280, 32, 20, swiglu=True),
    # 7B: SwiGLU (hidden 8192, aligned to 64), 4 storage tokens, no qkv bias, untied local-crop cls norm (dropped)
    'dinov3_vit7b16': ViTVariant('vit_7b_patch16_dinov3', 'dinov3', 4096, 40, 32, swiglu=True),
    'dinov2_vits14': ViTVariant('vit_small_patch14_dinov2', 'dinov2', 384, 12, 6),
    'dinov2_vitb14': ViTVariant('vit_base_patch14_dinov2', 'dinov2', 768, 12, 12),
    'dinov2_vitl14': ViTVariant('vit_large_patch14_dinov2', 'dinov2', 1024, 24, 16),
    # giant: DepthAnythingV2-Giant's backbone; packed SwiGLU (official w12/w3 = timm fc1/fc2, hidden 4096)
    'dinov2_vitg14': ViTVariant('vit_giant_patch14_dinov2', 'dinov2', 1536, 40, 24, swiglu=True),
}


def get_variant(model_name: str) -> ViTVariant:
    """The variant called ``model_name``; ValueError listing the valid names otherwise."""
    if model_name not in VARIANTS:
        raise ValueError(f'unknown model_name {model_name!r}; valid names: {", ".join(VARIANTS)}')
    return VARIANTS[model_name]
